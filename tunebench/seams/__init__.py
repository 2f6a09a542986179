"""The seams: Protocols with written contracts, and the data that crosses them.

deployment.py (Deployment, ServerHandle), load.py (LoadDriver, ClientResult) and
progress.py (Reporter). Implementations live in deploy/, load/, recorded/ and report/; only
the runner sequences them. Each Protocol declares everything its callers use.
"""
