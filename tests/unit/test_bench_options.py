"""`make bench` builds one parser from every benchmark part's options: two parts declaring the same option
made it fail before any run (the Spark part's --before met the files part's)."""

from __future__ import annotations

from benchmarks.run import build_parser


def test_every_part_of_make_bench_parses_its_options_together() -> None:
    args = build_parser().parse_args(["--only", "spark", "--spark-before", "/tmp/base", "--before", "/tmp/files"])
    assert (str(args.spark_before), args.before) == ("/tmp/base", "/tmp/files")
