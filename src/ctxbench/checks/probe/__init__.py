"""The probe, one folder: the check (`check.py`: short questions alone and concurrently, and one request that
reads fresh prose) and its parameters (`params.py`); its requests are the run report's requests table."""

from .check import PROBE, probe_request_count
from .params import ProbeParams  # the ad-hoc command's flags are its fields

__all__ = ["PROBE", "ProbeParams", "probe_request_count"]
