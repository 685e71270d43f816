"""runtime=docker: one container per workspace through the Docker SDK (exec, archive API; never a container IP)."""
