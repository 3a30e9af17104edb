"""The Engine: a CPU voxel world model with ground truth (depth, instance ids, poses, event states)."""
