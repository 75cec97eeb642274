"""Trajectory records: the common format of demonstrations for selector labels and HGKV groups."""

from causalcache_lab.data.trajectory import Step, Trajectory, load_trajectories, save_trajectories

__all__ = ["Step", "Trajectory", "load_trajectories", "save_trajectories"]
