"""Python bindings of the pipeline dialect (generated ops + type classes)."""
