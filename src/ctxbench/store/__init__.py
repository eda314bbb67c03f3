"""The run directory on disk, written as the run goes: the run's files, each check's summary files, the
ramp's table and the engine's counter snapshots."""
