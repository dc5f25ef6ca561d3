# NNGRAPH_CUDA: AUTO builds the cuda backend when the toolkit, cuDNN and cuBLAS are found;
# ON requires them; OFF skips the search. The backend's sources arrive with the cuda issue,
# so for now a found toolkit is only reported.
set(NNGRAPH_HAVE_CUDA OFF)
if(NOT NNGRAPH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_ROOT PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    message(STATUS "nngraph: CUDA ${CUDAToolkit_VERSION}, cuDNN and cuBLAS found; the cuda backend is not written yet")
  elseif(NNGRAPH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NNGRAPH_CUDA=ON but the CUDA toolkit, cuDNN or cuBLAS was not found "
                        "(toolkit: ${CUDAToolkit_FOUND}, cudnn.h: ${CUDNN_INCLUDE_DIR}, libcudnn: ${CUDNN_LIBRARY})")
  else()
    message(STATUS "nngraph: no CUDA toolkit with cuDNN and cuBLAS; building the cpu backend only")
  endif()
endif()
