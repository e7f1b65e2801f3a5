"""The Kubernetes edge: kopf handlers (thin), status writers, worker
Deployments and CRD generation."""
