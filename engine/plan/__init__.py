"""Planning: a typed config becomes a pinned, content-hashed RunSpec (`spec`); host-side git (`repos`)."""
