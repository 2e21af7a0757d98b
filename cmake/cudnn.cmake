# cuDNN attention (optional): cudnn.h + libcudnn (the CUDA toolkit's folders, CUDNN_HOME, or a
# pip `nvidia-cudnn-cu*` package) and the header-only cuDNN frontend (the PyPI wheel
# `nvidia-cudnn-frontend` puts cudnn_frontend.h under site-packages/include; scripts/setup.sh
# installs it into .venv when nvcc exists). Found: SUITE_HAVE_CUDNN and the target suite_cudnn.
# Override with -DCUDNN_FRONTEND_INCLUDE_DIR=..., -DCUDNN_INCLUDE_DIR=..., -DCUDNN_LIBRARY=...,
# or turn off with -DSUITE_ENABLE_CUDNN=OFF.
option(SUITE_ENABLE_CUDNN "Build the cuDNN SDPA attention engine when cuDNN and its frontend are found" ON)
set(SUITE_HAVE_CUDNN OFF)
if(SUITE_HAVE_CUDA AND SUITE_ENABLE_CUDNN)
  file(GLOB _suite_venv_includes ${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/include)
  find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
            HINTS ${_suite_venv_includes} ENV CUDNN_FRONTEND_HOME PATH_SUFFIXES include)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_HOME
            PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_HOME
               PATH_SUFFIXES lib lib64)
  if(CUDNN_FRONTEND_INCLUDE_DIR AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND TARGET CUDA::nvrtc)
    set(SUITE_HAVE_CUDNN ON)
    add_library(suite_cudnn INTERFACE)
    # SYSTEM: the frontend's headers are not held to the suite's warning flags.
    target_include_directories(suite_cudnn SYSTEM INTERFACE ${CUDNN_FRONTEND_INCLUDE_DIR}
                                                            ${CUDNN_INCLUDE_DIR})
    # The frontend references NVRTC (runtime-compiled engines); dladdr names the loaded libcudnn.
    target_link_libraries(suite_cudnn INTERFACE ${CUDNN_LIBRARY} CUDA::nvrtc ${CMAKE_DL_LIBS})
  endif()
endif()
# Read by scripts/gpu_bundle.sh to warn when a bundle would lack cuDNN attention.
set(SUITE_HAVE_CUDNN_FOUND ${SUITE_HAVE_CUDNN} CACHE INTERNAL "cuDNN attention built")
message(STATUS "cuDNN attention: ${SUITE_HAVE_CUDNN} (frontend: ${CUDNN_FRONTEND_INCLUDE_DIR}; "
               "cudnn.h: ${CUDNN_INCLUDE_DIR}; libcudnn: ${CUDNN_LIBRARY})")
