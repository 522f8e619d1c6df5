"""Reproducible throughput scenarios (`make bench`)."""
