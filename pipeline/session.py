"""SparkSession for the pipeline: workers run this interpreter and can import our packages.

Local masters inherit PYTHONPATH; any other master also gets protocol/, storage/ and pipeline/
shipped as a zip (addPyFile), so a cluster needs only Python, pyarrow, numpy, cramjam and crc32c.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

from pipeline.source import register

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_PACKAGES = ("protocol", "storage", "pipeline")


def spark_session(
    master: str = "local[*]",
    app_name: str = "kafka-sim-pipeline",
    *,
    progress: bool = True,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the session with the `kafka-sim-log` data source registered."""
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in paths:  # local workers are forked with the driver's environment
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *paths])
    settings = {
        "spark.pyspark.python": python,
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.ui.showConsoleProgress": "true" if progress else "false",
    }
    if master.startswith("local"):
        # Everything stays on loopback: no web UI on 0.0.0.0:4040, driver bound to 127.0.0.1.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.ui.enabled": "false"}
    settings |= conf or {}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # Spark prints its console progress bar at WARN
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(str(_code_zip()))
    register(spark)
    return spark


def _code_zip() -> Path:
    """Our reading code as one zip for remote executors (pipeline -> storage -> protocol)."""
    out = Path(tempfile.mkdtemp(prefix="kafka-sim-pipeline-")) / "kafka_sim_code.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in SHIPPED_PACKAGES:
            for file in sorted((REPO_ROOT / package).rglob("*.py")):
                zf.write(file, file.relative_to(REPO_ROOT))
    return out
