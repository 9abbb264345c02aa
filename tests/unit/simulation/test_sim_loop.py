"""The simulation's event loop and network: simulated time jumps over idle spans, thread work runs
in place, bytes arrive in order after their latency, and a partition holds them until it heals."""

from __future__ import annotations

import asyncio
import threading

import pytest

from broker.simulation.sim_loop import SimulatedLoop, SimulationStalled
from broker.simulation.sim_network import LATENCY_S, SimulatedNetwork


def run(coro_fn):
    loop = SimulatedLoop()
    try:
        return loop.run_until_complete(coro_fn())
    finally:
        loop.close()


def test_an_hour_of_sleep_moves_simulated_time_only():
    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        async with asyncio.timeout(10):
            await asyncio.sleep(9.5)
        return loop.time()

    assert run(main) == pytest.approx(3609.5)


def test_timers_fire_in_order_of_their_deadlines():
    async def main():
        fired = []
        loop = asyncio.get_running_loop()
        for delay in (3.0, 1.0, 2.0):
            loop.call_later(delay, lambda d=delay: fired.append((d, loop.time())))
        await asyncio.sleep(5)
        return fired

    assert run(main) == [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]


def test_thread_work_runs_in_place_on_the_loops_thread():
    async def main():
        before = asyncio.get_running_loop().time()
        thread = await asyncio.to_thread(threading.get_ident)
        return thread, asyncio.get_running_loop().time() - before

    thread, elapsed = run(main)
    assert thread == threading.get_ident() and elapsed == 0


def test_a_failing_worker_function_raises_in_the_awaiting_task():
    def fail():
        raise OSError("disk")

    async def main():
        with pytest.raises(OSError, match="disk"):
            await asyncio.to_thread(fail)

    run(main)


def test_waiting_on_what_never_comes_is_reported_not_hung():
    async def main():
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimulationStalled):
        run(main)


async def _echo_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(100):
        writer.write(data.upper())


def test_bytes_arrive_in_order_after_the_latency():
    async def main():
        loop = asyncio.get_running_loop()
        network = SimulatedNetwork(loop)
        network.listen("broker-0", _echo_server)
        reader, writer = await network.connect("client", "broker-0", 1.0)
        sent = loop.time()
        writer.write(b"abc")
        writer.write(b"def")
        got = await reader.readexactly(6)
        return got, loop.time() - sent

    got, took = run(main)
    assert got == b"ABCDEF"
    assert took == pytest.approx(2 * LATENCY_S)


def test_a_partition_holds_bytes_until_it_heals():
    async def main():
        loop = asyncio.get_running_loop()
        network = SimulatedNetwork(loop)
        network.listen("broker-0", _echo_server)
        reader, writer = await network.connect("client", "broker-0", 1.0)
        network.partition(["client"], ["broker-0"])
        writer.write(b"held")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(30):
                await reader.readexactly(4)
        loop.call_later(5, network.heal, ["client"], ["broker-0"])
        got = await reader.readexactly(4)
        return got, loop.time()

    got, at = run(main)
    assert got == b"HELD" and at == pytest.approx(35 + 3 * LATENCY_S, abs=1e-3)


def test_connecting_across_a_partition_times_out_and_to_nobody_is_refused():
    async def main():
        network = SimulatedNetwork(asyncio.get_running_loop())
        network.listen("broker-0", _echo_server)
        network.partition(["client"], ["broker-0"])
        with pytest.raises(TimeoutError):
            await network.connect("client", "broker-0", 2.0)
        with pytest.raises(ConnectionRefusedError):
            await network.connect("client", "broker-9", 2.0)

    run(main)


def test_a_close_reaches_the_peer_after_the_bytes_before_it():
    async def main():
        network = SimulatedNetwork(asyncio.get_running_loop())
        got = asyncio.get_running_loop().create_future()

        async def server(reader, writer):
            got.set_result(await reader.read())  # until EOF

        network.listen("broker-0", server)
        _, writer = await network.connect("client", "broker-0", 1.0)
        writer.write(b"last words")
        writer.close()
        return await got

    assert run(main) == b"last words"
