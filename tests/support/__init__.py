"""What the suites share, one module per part of the world a test stands up
or drives; the conftest files only turn these into fixtures.

- database:   the PostgreSQL server, a migrated template copied per test, `fetch` for e2e
- timetravel: `time_passes`, instead of sleeping through leases and timeouts
- store:      drive the real store as the operator would (define, start, decide, lease, report)
- plane:      the execution plane in the test's event loop, and HTTP and SDK helpers for it
- operators:  `start_operator`, the one way to run `sluiceway operator` as a process
- workers:    `start_worker`, `sluiceway worker` as a process
- processes:  `stop_all`, stopping processes in parallel
- kube:       the real API server with the CRDs, and a kubectl driver
- api:        a small HTTP client for the e2e tests
- secured:    an operator in `kubernetes` auth mode with two tenant namespaces and their tokens
- waiting:    `eventually` (blocking) and `eventually_async`
- fuzzing:    the schemathesis pass and its hooks
- grpc_shop:  a real gRPC server with reflection, for the e2e GRPC tasks
"""
