"""Energy per point: GPU power through NVML or a Prometheus that scrapes the DCGM exporter,
CPU package energy through RAPL; docs/energy.md."""
