"""Images: the input-addressed task images (`images`) and the offline base image (`baseimage`)."""
