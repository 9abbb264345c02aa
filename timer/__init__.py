"""Time and delays: clocks, timer tasks, the hierarchical timing wheel, the system timer and its reaper."""

from timer.clock import Clock, ManualClock, MonotonicClock
from timer.reaper import ExpiredOperationReaper
from timer.system_timer import BucketHeap, SystemTimer
from timer.timer_task import FunctionTimerTask, TimerTask
from timer.timer_task_list import TaskCounter, TimerTaskEntry, TimerTaskList
from timer.timing_wheel import TimingWheel
from timer.virtual_clock import ClockState, VirtualClock

__all__ = [
    "BucketHeap",
    "ClockState",
    "Clock",
    "ExpiredOperationReaper",
    "FunctionTimerTask",
    "ManualClock",
    "MonotonicClock",
    "SystemTimer",
    "TaskCounter",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "VirtualClock",
]
