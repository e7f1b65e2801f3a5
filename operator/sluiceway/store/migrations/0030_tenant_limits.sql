-- Namespaces as tenant boundaries: a Quota may lower the operator's payload
-- limit for its namespace, and list the destinations its system tasks (HTTP,
-- HTTP_POLL, WEBHOOK, GRPC) may reach although the egress policy denies them
-- by default (loopback, cluster ranges, the Kubernetes API, ...).

ALTER TABLE quotas
    ADD COLUMN max_payload_bytes bigint,                      -- NULL: the operator's limit
    ADD COLUMN allowed_egress    text[] NOT NULL DEFAULT '{}'; -- hosts, addresses, CIDRs
