"""Observability of a stack: the documented metric names, the PromQL alert rules and the
Cloud Monitoring dashboard. infra/components/observability.py declares them with Pulumi;
docs/observability.md explains each panel and alert."""
