"""The channel count: DataX's JobContainer.adjustChannelNumber, exactly, with one kindness.

A job byte limit divided by the per-channel byte limit, and a job record limit divided by the
per-channel record limit, each at least 1; the smaller wins. Without either limit,
``settings.speed.channel``; without that, the engine default (DataX fails "speed must be set"
there). The count is then capped at the number of splits (:func:`cap_at_splits`).

A job limit without its per-channel limit is a configuration error naming both keys (DataX #760
ignored it silently in some versions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wormhole.config import MAX_CHANNELS, EngineConf
from wormhole.errors import InvalidTaskConfig
from wormhole.task_spec import SpeedSpec

ChannelRule = Literal["byte", "record", "channel", "default"]


@dataclass(frozen=True, slots=True)
class SpeedLimits:
    """The speed settings of one run, the task's over engine.toml's."""

    byte: int | None
    record: int | None
    channel_byte: int | None
    channel_record: int | None
    channel: int | None
    default_channels: int


@dataclass(frozen=True, slots=True)
class ChannelCount:
    channels: int
    rule: ChannelRule
    reason: str
    """Which rule set the count, in words (``wormhole plan``'s ``channel_reason``)."""


def speed_limits(speed: SpeedSpec, conf: EngineConf) -> SpeedLimits:
    """Resolve the task's speed settings over the engine's; InvalidTaskConfig (exit 204) when a job
    limit has no per-channel limit to divide it by."""
    limits = SpeedLimits(
        byte=speed.byte, record=speed.record,
        channel_byte=speed.channel_byte if speed.channel_byte is not None else conf.speed.channel_byte,
        channel_record=speed.channel_record if speed.channel_record is not None else conf.speed.channel_record,
        channel=speed.channel, default_channels=conf.reader.channels)
    problems = []
    for kind in ("byte", "record"):
        if getattr(limits, kind) is not None and getattr(limits, f"channel_{kind}") is None:
            problems.append(f"settings.speed.{kind}: a task {kind} limit needs a per-channel {kind} limit to set the "
                            f"channel count: set settings.speed.channel_{kind} in the task or channel_{kind} "
                            f"under [speed] in engine.toml")
    if problems:
        raise InvalidTaskConfig(problems)
    return limits


def adjust_channel_number(limits: SpeedLimits) -> ChannelCount:
    """DataX's adjustChannelNumber (see the module docstring), at most ``MAX_CHANNELS``."""
    count = _datax_channel_number(limits)
    if count.channels <= MAX_CHANNELS:
        return count
    return ChannelCount(MAX_CHANNELS, count.rule,
                        f"{count.reason}, capped at {MAX_CHANNELS} (the most a task may have)")


def _datax_channel_number(limits: SpeedLimits) -> ChannelCount:
    by_byte = by_record = None
    if limits.byte is not None:
        assert limits.channel_byte is not None  # speed_limits() checked
        by_byte = max(limits.byte // limits.channel_byte, 1)
    if limits.record is not None:
        assert limits.channel_record is not None
        by_record = max(limits.record // limits.channel_record, 1)
    if by_byte is not None and (by_record is None or by_byte < by_record):  # a tie: record, as DataX
        return ChannelCount(by_byte, "byte", f"settings.speed.byte {limits.byte} / channel_byte "
                                             f"{limits.channel_byte} = {by_byte}"
                            + (f" (record gives {by_record})" if by_record is not None else ""))
    if by_record is not None:
        return ChannelCount(by_record, "record", f"settings.speed.record {limits.record} / channel_record "
                                                 f"{limits.channel_record} = {by_record}"
                            + (f" (byte gives {by_byte})" if by_byte is not None else ""))
    if limits.channel is not None:
        return ChannelCount(limits.channel, "channel", f"settings.speed.channel {limits.channel}")
    return ChannelCount(limits.default_channels, "default",
                        f"no speed setting: engine default reader.channels {limits.default_channels}")


def cap_at_splits(count: ChannelCount, splits: int) -> ChannelCount:
    """No more channels than splits (DataX: needChannelNumber = min(needChannelNumber, taskNumber))."""
    if count.channels <= splits:
        return count
    capped = max(splits, 1)  # nothing to read still runs one (idle) channel
    return ChannelCount(capped, count.rule, f"{count.reason}, capped at {splits} split(s)")
