"""Campaigns: the campaign file (its `[checks.*]` tables derived from the checks), its preflight, the
suite that runs a deployment's checks, the resumable campaign runner, the demo and distributed runs."""
