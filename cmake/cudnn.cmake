# cuDNN attention (optional): cudnn.h + libcudnn (the CUDA toolkit's folders, CUDNN_HOME, or a
# pip `nvidia-cudnn-cu*` package's site-packages/nvidia/cudnn) and the header-only cuDNN frontend
# (the PyPI wheel `nvidia-cudnn-frontend` puts cudnn_frontend.h under site-packages/include;
# scripts/setup.sh installs it into .venv when nvcc exists). Found: SUITE_HAVE_CUDNN and the
# target suite_cudnn. Override with -DCUDNN_FRONTEND_INCLUDE_DIR=..., -DCUDNN_INCLUDE_DIR=...,
# -DCUDNN_LIBRARY=..., or turn off with -DSUITE_ENABLE_CUDNN=OFF.
option(SUITE_ENABLE_CUDNN "Build the cuDNN SDPA attention engine when cuDNN and its frontend are found" ON)
set(SUITE_HAVE_CUDNN OFF)
if(SUITE_HAVE_CUDA AND SUITE_ENABLE_CUDNN)
  file(GLOB _suite_venv_includes ${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/include)
  find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
            HINTS ${_suite_venv_includes} ENV CUDNN_FRONTEND_HOME PATH_SUFFIXES include)
  # CUDNN_HOME (a CMake or environment variable) first, then the toolkit's own folders.
  suite_hint_prefix(CUDNN_HOME _cudnn_home)
  suite_forget_outside("${_cudnn_home}" CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_home} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_home} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  suite_check_hint(cudnn CUDNN_HOME "${CUDNN_LIBRARY}" "${CUDNN_LIBRARY}")
  if(CUDNN_FRONTEND_INCLUDE_DIR AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND TARGET CUDA::nvrtc)
    set(SUITE_HAVE_CUDNN ON)
    add_library(suite_cudnn INTERFACE)
    # SYSTEM: the frontend's headers are not held to the suite's warning flags.
    target_include_directories(suite_cudnn SYSTEM INTERFACE ${CUDNN_FRONTEND_INCLUDE_DIR}
                                                            ${CUDNN_INCLUDE_DIR})
    # The frontend references NVRTC (runtime-compiled engines); dladdr names the loaded libcudnn.
    target_link_libraries(suite_cudnn INTERFACE ${CUDNN_LIBRARY} CUDA::nvrtc ${CMAKE_DL_LIBS})
    suite_header_version(${CUDNN_INCLUDE_DIR}/cudnn_version.h _cudnn_version
                         CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)
    suite_header_version(${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h _frontend_version
                         CUDNN_FRONTEND_MAJOR_VERSION CUDNN_FRONTEND_MINOR_VERSION
                         CUDNN_FRONTEND_PATCH_VERSION)
    suite_found("cuDNN" "${_cudnn_version} (frontend ${_frontend_version})" "${CUDNN_LIBRARY}")
  else()
    set(_lacking)
    foreach(_part CUDNN_LIBRARY CUDNN_INCLUDE_DIR CUDNN_FRONTEND_INCLUDE_DIR)
      if(NOT ${_part})
        list(APPEND _lacking ${_part})
      endif()
    endforeach()
    if(NOT TARGET CUDA::nvrtc)
      list(APPEND _lacking "NVRTC")
    endif()
    string(REPLACE ";" ", " _lacking "${_lacking}")
    suite_ways(cudnn _ways)
    suite_off("no cuDNN attention (not found: ${_lacking}): the fused attention runs the suite's own "
              "flash kernel. For cuDNN: ${_ways} (or pip install nvidia-cudnn-cu12 and "
              "CUDNN_HOME=<site-packages>/nvidia/cudnn); its frontend headers: scripts/setup.sh "
              "installs nvidia-cudnn-frontend into .venv")
  endif()
elseif(SUITE_HAVE_CUDA)
  suite_off("no cuDNN attention (SUITE_ENABLE_CUDNN=OFF): the fused attention runs the suite's own flash kernel")
endif()
# Read by scripts/gpu_bundle.sh to warn when a bundle would lack cuDNN attention.
set(SUITE_HAVE_CUDNN_FOUND ${SUITE_HAVE_CUDNN} CACHE INTERNAL "cuDNN attention built")
