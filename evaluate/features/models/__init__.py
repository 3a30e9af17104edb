"""The heavy model code the learned features run (DA3, SEA-RAFT, VGGT, Q-Align, identity models), their loaders and
the catalogue of what each needs (source, licence, fetch command)."""
