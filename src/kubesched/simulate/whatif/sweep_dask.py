"""``kubesched sweep --engine dask --dask-scheduler tcp://HOST:PORT``: the sweep's jobs on an existing
Dask distributed cluster, gathered here into the same results as a local sweep.

Why Dask (not Ray): a sweep is a bag of independent, seconds-to-minutes Python jobs with kilobyte
results — no shared objects, actors or GPUs. Dask's scheduler and workers are plain processes
(``dask scheduler``, ``dask worker ADDRESS``) from pure-Python wheels, started and stopped like any
program; Ray brings a ~70 MB binary wheel, its own object store, raylet and dashboard for features a
sweep does not use. Dask reschedules the jobs of a worker that dies (up to its
``distributed.scheduler.allowed-failures``), which with seeded jobs changes nothing in the results.

Each job runs ``sweep_files.run_shipped_job`` (``run_job`` on copies of its input files, sent from
here); the workers need kubesched (the same version: checked before anything is sent) and any plugin
module given by name installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kubesched.app.startup import UserError
from kubesched.simulate.whatif.sweep import SweepJob
from kubesched.simulate.whatif.sweep_files import (
    input_paths,
    read_input,
    remove_sweep_dir,
    run_shipped_job,
    shipped_input,
)

__all__ = ["CONNECT_TIMEOUT", "DaskSweep", "connect"]

#: How long connecting to the scheduler, and waiting for its first worker, may take.
CONNECT_TIMEOUT = 10.0
#: How long a sweep waits with no worker at all before it gives up (a worker restarted by its nanny
#: comes back well within it).
NO_WORKER_GRACE = 60.0
INSTALL_HINT = "pip install 'kubesched[dask]'"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UserError(f"--engine dask needs Dask's distributed package: {INSTALL_HINT}") from None
    return distributed


class _NotDask(Exception):
    pass


async def _identity(address: str, timeout: float) -> dict[str, Any]:
    """Connect (OSError: nothing listening, or unreachable within ``timeout``), then ask who it is
    (_NotDask: no answer in Dask's protocol within ``timeout``). ValueError: not an address."""
    comm_module = _distributed().comm
    host, port = comm_module.get_address_host_port(address)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except TimeoutError:
        raise OSError(f"no connection within {timeout:g} s") from None
    writer.close()
    try:
        # Dask's own connect waits for a handshake that a server of another kind never sends.
        async with asyncio.timeout(timeout):
            comm = await comm_module.connect(address, timeout=timeout)
            try:
                await comm.write({"op": "identity", "reply": True})
                reply = await comm.read()
            finally:
                comm.abort()
    except Exception as e:  # an HTTP server, the dashboard port, ...: garbage or silence
        raise _NotDask() from e
    if not isinstance(reply, dict):
        raise _NotDask()
    return reply


def _check_scheduler(address: str, timeout: float) -> None:
    """Ask the address who it is before a Client is made: a wrong address fails here within
    ``timeout`` (twice that at worst) with one line (a Client that cannot connect retries, then complains
    from its finaliser)."""
    try:
        identity = asyncio.run(_identity(address, timeout))
    except ValueError as e:  # malformed address, unknown scheme
        raise UserError(f"--dask-scheduler {address!r}: {e} (expected tcp://HOST:PORT)") from None
    except OSError as e:
        raise UserError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    except _NotDask:
        raise UserError(f"{address} did not answer as a Dask scheduler (is that the scheduler's port, "
                        "8786 by default, not its dashboard's?)") from None
    if identity.get("type") != "Scheduler":
        raise UserError(f"{address} is a Dask {identity.get('type') or 'endpoint'}, not a scheduler")


@contextmanager
def connect(address: str, timeout: float = CONNECT_TIMEOUT) -> Iterator[DaskSweep]:
    """A client of the Dask scheduler at ``address`` with at least one worker running this
    kubesched version; UserError otherwise."""
    distributed = _distributed()
    import kubesched

    _check_scheduler(address, timeout)
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as e:  # it answered a moment ago: gone, or too busy to take a client
        raise UserError(f"cannot connect to the Dask scheduler at {address}: {e}") from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise UserError(f"the Dask scheduler at {address} has no workers (none joined within {timeout:g} s); "
                            f"start some with: dask worker {address}") from None
        versions = client.get_versions(packages=["kubesched"])["workers"]
        wrong = {w: v["packages"].get("kubesched") for w, v in versions.items()
                 if v["packages"].get("kubesched") != kubesched.__version__}
        if wrong:
            worker, version = sorted(wrong.items())[0]
            found = f"kubesched {version}" if version else "no kubesched"
            raise UserError(f"Dask worker {worker} has {found} (here: {kubesched.__version__}); install the same "
                            f"kubesched on every worker ({INSTALL_HINT}), and the plugin packages a sweep names")
        yield DaskSweep(client, address)
    finally:
        client.close()


class DaskSweep:
    def __init__(self, client: Any, address: str) -> None:
        #: A ``distributed.Client`` (Any: distributed is an optional extra and only partly typed).
        self.client = client
        self.address = address

    @property
    def workers(self) -> int:
        """Worker threads (jobs that run at once)."""
        return sum(int(n) for n in self.client.nthreads().values())

    def run(self, jobs: Sequence[SweepJob], done: Callable[[dict[str, Any]], None] | None = None
            ) -> list[dict[str, Any]]:
        """Every job on the cluster; the results in job order, ``done`` called as each arrives."""
        sweep_id = uuid.uuid4().hex[:12]
        paths = sorted({p for job in jobs for p in input_paths(job)})
        try:
            shipped = {p: read_input(p) for p in paths}
        except OSError as e:
            raise UserError(f"sweep: cannot read {e.filename}: {e.strerror or e}") from None
        # Sent once each, as a task that returns it: a worker fetches what its jobs need from a peer,
        # and when the worker holding it dies the scheduler runs that task again (scattered data
        # would be lost with it, and the jobs needing it cancelled).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)  # a large cluster dump: meant
            sent = {p: self.client.submit(shipped_input, item, key=f"kubesched-sweep-{sweep_id}-input-{i}",
                                          pure=False)
                    for i, (p, item) in enumerate(shipped.items())}
        futures = [
            self.client.submit(run_shipped_job, job, [sent[p] for p in input_paths(job)], sweep_id,
                               key=f"kubesched-sweep-{sweep_id}-{job.index:05d}", pure=False)
            for job in jobs
        ]
        finished: queue.Queue[Any] = queue.Queue()
        for future in futures:
            future.add_done_callback(finished.put)
        results: list[dict[str, Any]] = []
        no_worker_since: float | None = None
        try:
            while len(results) < len(futures):
                try:
                    future = finished.get(timeout=1.0)
                except queue.Empty:
                    no_worker_since = self._check_workers(no_worker_since, len(futures) - len(results))
                    continue
                r = future.result()  # a job's error is raised here (and the sweep stops)
                results.append(r)
                if done is not None:
                    done(r)
        finally:
            self.client.cancel([*futures, *sent.values()])
            with contextlib.suppress(Exception):  # best effort: a worker that is gone has nothing to remove
                self.client.run(remove_sweep_dir, sweep_id)
        return sorted(results, key=lambda r: r["index"])

    def _check_workers(self, since: float | None, left: int) -> float | None:
        """While jobs wait: when the cluster last had no worker (None: it has some); a UserError once
        that has lasted ``NO_WORKER_GRACE`` (else the sweep would wait for ever)."""
        if self.client.nthreads():
            return None
        now = time.monotonic()
        if since is not None and now - since > NO_WORKER_GRACE:
            raise UserError(f"the Dask cluster at {self.address} has had no worker for {NO_WORKER_GRACE:g} s; "
                            f"{left} simulation(s) did not run")
        return since if since is not None else now
