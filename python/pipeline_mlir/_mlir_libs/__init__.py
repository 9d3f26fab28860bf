# Native extension modules of pipeline_mlir live here (built by CMake).
