/* Force-included after smpicxx's smpi/smpi_helpers.h in the SMPI build (cmake/smpi.cmake):
   its `exit(x)` macro breaks member functions named exit (CLI11's App::exit). The suite never
   calls exit() from a rank (main returns its status), so nothing is lost. */
#undef exit
