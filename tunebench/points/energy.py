"""What a point's energy was per token: the meter's reading of the window over the tokens
the client counted in it. Without a reading the numbers stay empty and `energy_note` says
why: a missing meter is never reported as 0 J."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.points.cells import EnergyCells, PointCells


@dataclass(frozen=True)
class EnergyReading:
    joules: float  # summed over the devices measured
    mean_watts: float  # joules / window seconds
    source: str  # nvml | dcgm | rapl
    devices: str  # what was measured, e.g. "2 GPUs (0,1)" or "package-0"
    method: str  # counter (an energy counter interpolated) | power (power samples averaged)
    samples: int  # readings inside the window


def energy_columns(row: PointCells, reading: EnergyReading | str) -> EnergyCells:
    out: EnergyCells = {
        "energy_j": None,
        "power_w": None,
        "joules_per_output_token": None,
        "joules_per_token": None,
        "energy_source": None,
        "energy_note": None,
    }
    if isinstance(reading, str):
        out["energy_note"] = f"no energy: {reading}"[:300]
        return out
    out["energy_j"] = round(reading.joules, 3)
    out["power_w"] = round(reading.mean_watts, 3)
    out["energy_source"] = f"{reading.source} {reading.method}: {reading.devices}"[:300]
    # mean power over the tokens per second of the same window: J per token
    output, total = row.get("output_tok_s"), row.get("total_tok_s")
    if output:
        out["joules_per_output_token"] = reading.mean_watts / output
    if total:
        out["joules_per_token"] = reading.mean_watts / total
    return out
