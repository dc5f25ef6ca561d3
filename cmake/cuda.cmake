# NNGRAPH_CUDA: AUTO builds the cuda backend when the CUDA toolkit (nvcc), cuDNN and cuBLAS
# are found; ON requires them; OFF skips the search. cuDNN and cuBLAS come from the system,
# CUDNN_ROOT / CUBLAS_ROOT, or the nvidia-* wheels installed for this Python.
set(NNGRAPH_HAVE_CUDA OFF)
if(NOT NNGRAPH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  include(CheckLanguage)
  check_language(CUDA)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c [=[
import importlib.util as u
for m in ("nvidia.cudnn", "nvidia.cu13", "nvidia.cublas", "nvidia.cu12"):
    try:
        s = u.find_spec(m)
    except ModuleNotFoundError:
        s = None
    print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else "")
]=]
    OUTPUT_VARIABLE _nv_wheels OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" ";" _nv_wheels "${_nv_wheels}")
  # The library first (system and *_ROOT installs before wheels), then the headers beside it,
  # so compile, link and run time all use one installation.
  macro(_nngraph_find var header names root)
    find_library(${var}_LIBRARY NAMES ${names} NAMES_PER_DIR HINTS $ENV{${root}} ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
    if(NOT ${var}_LIBRARY)
      find_library(${var}_LIBRARY NAMES ${names} NAMES_PER_DIR HINTS ${_nv_wheels} PATH_SUFFIXES lib lib64)
    endif()
    if(${var}_LIBRARY)
      get_filename_component(_dir "${${var}_LIBRARY}" DIRECTORY)
      find_path(${var}_INCLUDE_DIR ${header} HINTS "${_dir}/../include" "${_dir}/../../include"
                ${CUDAToolkit_INCLUDE_DIRS} NO_CACHE)
    endif()
  endmacro()
  _nngraph_find(CUDNN cudnn.h "cudnn;libcudnn.so.9" CUDNN_ROOT)
  _nngraph_find(CUBLAS cublas_v2.h "cublas;libcublas.so.13;libcublas.so.12" CUBLAS_ROOT)
  if(CUBLAS_LIBRARY)  # cuBLASLt: the installation's own, beside cuBLAS
    get_filename_component(_dir "${CUBLAS_LIBRARY}" DIRECTORY)
    find_library(CUBLASLT_LIBRARY NAMES cublasLt libcublasLt.so.13 libcublasLt.so.12 NAMES_PER_DIR HINTS "${_dir}"
                 NO_DEFAULT_PATH)
  endif()
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND CUBLAS_INCLUDE_DIR
     AND CUBLAS_LIBRARY AND CUBLASLT_LIBRARY)
    set(NNGRAPH_HAVE_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # sm_90 machine code plus compute_90 PTX
    endif()
    enable_language(CUDA)  # directory scope: a function could not
    set(CMAKE_CUDA_STANDARD 17)
    message(STATUS "nngraph: cuda backend with CUDA ${CUDAToolkit_VERSION}, ${CUDNN_LIBRARY}, ${CUBLAS_LIBRARY}")
  elseif(NNGRAPH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NNGRAPH_CUDA=ON but something is missing: nvcc '${CMAKE_CUDA_COMPILER}', "
                        "cudnn.h '${CUDNN_INCLUDE_DIR}', libcudnn '${CUDNN_LIBRARY}', "
                        "cublas_v2.h '${CUBLAS_INCLUDE_DIR}', libcublas '${CUBLAS_LIBRARY}', "
                        "libcublasLt '${CUBLASLT_LIBRARY}'")
  else()
    message(STATUS "nngraph: no CUDA toolkit with cuDNN and cuBLAS; building the cpu backend only")
  endif()
endif()

# Adds the cuda backend to `target` (the engine library) and its library folders to the
# run path of `module` (the extension).
function(nngraph_add_cuda target module)
  file(GLOB _cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/cuda/*.cpp
       ${PROJECT_SOURCE_DIR}/shaders/cuda/*.cu)
  target_sources(${target} PRIVATE ${_cuda_sources})
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}" CUDA_STANDARD 17)
  target_compile_definitions(${target} PUBLIC NNGRAPH_HAVE_CUDA)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/shaders/cuda)
  target_include_directories(${target} PUBLIC ${CUDNN_INCLUDE_DIR} ${CUBLAS_INCLUDE_DIR})
  target_link_libraries(${target} PUBLIC CUDA::cudart_static ${CUDNN_LIBRARY} ${CUBLAS_LIBRARY} ${CUBLASLT_LIBRARY})
  get_filename_component(_cudnn_dir "${CUDNN_LIBRARY}" DIRECTORY)
  get_filename_component(_cublas_dir "${CUBLAS_LIBRARY}" DIRECTORY)
  get_target_property(_rpath ${module} INSTALL_RPATH)
  # The libraries linked against come first; the wheel folders serve a moved installation.
  set_target_properties(${module} PROPERTIES INSTALL_RPATH
    "${_cudnn_dir};${_cublas_dir};${_rpath};$ORIGIN/../nvidia/cudnn/lib;$ORIGIN/../nvidia/cu13/lib")
  if(TARGET nngraph_tests)
    set_property(TARGET nngraph_tests APPEND PROPERTY BUILD_RPATH "${_cudnn_dir};${_cublas_dir}")
    target_include_directories(nngraph_tests PRIVATE ${PROJECT_SOURCE_DIR}/shaders/cuda)
  endif()
endfunction()
