"""The DRA form: GPUs asked through ResourceClaims (and their templates), DeviceClasses, ResourceSlices."""
