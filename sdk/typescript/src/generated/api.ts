// Generated from sdk/openapi.json by openapi-typescript (npm run generate): do not edit.
// `make lint` fails when it drifts from the document.

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: the process serves requests */
        get: operations["healthz_healthz_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Prometheus metrics */
        get: operations["metrics_metrics_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: PostgreSQL answers */
        get: operations["readyz_readyz_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The events published in the namespace, newest first */
        get: operations["list_events_v1_ns__namespace__events_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/events/{event_record_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One published event: its payload and what each Trigger did with it */
        get: operations["get_event_v1_ns__namespace__events__event_record_id__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/events/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Publish an event: start the runs of the namespace's Triggers of that event
         * @description The body is the event's payload: any JSON value. Its id, which runs
         *     are deduplicated by unless a Trigger says otherwise, is the
         *     `X-Sluiceway-Event-Id` (or `Idempotency-Key`) header, else a hash of the body.
         */
        post: operations["publish_v1_ns__namespace__events__name__post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List and search runs, newest first
         * @description Every filter narrows (AND); `status` and `in` take several values.
         *     Pages are keyset pages in start order (`newest` first unless
         *     `order=oldest`), stable while runs are added, and never counted: follow
         *     `nextCursor` until it is null.
         */
        get: operations["list_runs"];
        put?: never;
        /**
         * Start a run (and wait for it to end)
         * @description `requestId` (or the `Idempotency-Key` header) makes the start
         *     idempotent for the idempotency window: a retry gets the same run back
         *     (200, `created: false`), and concurrent retries create one run.
         *
         *     `wait` (e.g. `30s`, at most 60 s): answer once the run ends, 200 with
         *     the run (status, output, reason), or 202 with its id and status when
         *     the wait ends first; wait again on `GET .../{id}?wait=`. A retried
         *     start with the same requestId waits for the same run.
         */
        post: operations["start_v1_ns__namespace__executions_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/starts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start several runs in one request
         * @description Each start is validated and judged on its own: one bad item never costs
         *     the others. 200 when every item started a run (or, for a retried
         *     requestId, found it); 207 otherwise. One outcome per item, in the order
         *     sent, with the code and body the single start would have answered: 201
         *     started, 200 found by its requestId, 404, 409, 413, 422 naming the field,
         *     429. All the starts go in one transaction; plain ones with one
         *     multi-row insert.
         */
        post: operations["start_runs"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a run and its tasks (once it ends, with `wait`)
         * @description `wait` (e.g. `30s`, at most 60 s): answer once the run ends, or as it
         *     is when the wait ends first (its status says which).
         */
        get: operations["get_run"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/audit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Who changed the run, and through which edge, oldest first
         * @description Every operation that changed the run (start, terminate, pause, resume,
         *     retry, rerun, restart, decide, message, a HUMAN task's decision, a
         *     webhook's acceptance), through the API, the UI, a WorkflowRun's spec or a
         *     schedule, with who made it: the authenticated identity, the WorkflowRun,
         *     the scheduler.
         */
        get: operations["run_audit"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/decide": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Force an evaluation
         * @description An escape hatch and a diagnostic: if this unsticks a run, something
         *     failed to enqueue an evaluation. It also releases a quarantined run: the
         *     decider tries it once more, and quarantines it again if its cause is still
         *     there (`released` says whether it was quarantined).
         */
        post: operations["force_decide"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/logs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** What the run's tasks logged */
        get: operations["run_logs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/messages": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Send a message to a run: PULL_WORKFLOW_MESSAGES tasks take them in order, each once
         * @description The body is the message: any JSON value. Messages are kept in the run's
         *     durable queue until a PULL_WORKFLOW_MESSAGES task takes them.
         */
        post: operations["send_message_v1_ns__namespace__executions__execution_id__messages_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Pause a running run
         * @description Nothing new is scheduled and the run's clocks stop; tasks already
         *     leased finish and their results are recorded. Pausing a paused run
         *     changes nothing.
         */
        post: operations["pause_run"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/rerun": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Rerun a finished run from one task
         * @description The task, what it contains and every task after it start afresh (the
         *     task with `input` merged over its inputs, if given); the others keep their
         *     outputs.
         */
        post: operations["rerun_run"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/restart": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Restart a finished run as a new run
         * @description A new run of the same workflow (the same version unless
         *     `latestVersion`), with the old input unless given, linked to the old run
         *     by `restartedFrom`.
         */
        post: operations["restart_run"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Resume a paused run
         * @description The run's deadline and SLA move forward by the time it was paused (a
         *     chain deadline does not); held tasks are queued again.
         */
        post: operations["resume_run"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/retry": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retry a failed run from the tasks that failed
         * @description For a run that FAILED, TIMED_OUT or was TERMINATED: the tasks that
         *     failed, timed out or were canceled start again with a fresh retryCount;
         *     what completed keeps its output.
         */
        post: operations["retry_run"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/terminate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Terminate a running run */
        post: operations["terminate_run"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/executions/{execution_id}/why": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Why is this run not further along? */
        get: operations["why_run"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/metadata/task-definitions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every task definition of the namespace */
        get: operations["list_task_definitions_v1_ns__namespace__metadata_task_definitions_get"];
        put?: never;
        /** Create or update a task definition */
        post: operations["put_task_definition"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/metadata/task-definitions/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One task definition */
        get: operations["get_task_definition_v1_ns__namespace__metadata_task_definitions__name__get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/metadata/workflow": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every workflow of the namespace, at the version new runs start on */
        get: operations["list_workflows"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/metadata/workflow/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * One workflow's definition: the live version, or a pinned one
         * @description A version stays readable while runs pin it, even after its Workflow is deleted.
         */
        get: operations["get_workflow"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/queues": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every queue: ready, delayed and in-flight tasks, and recent pollers */
        get: operations["queues_v1_ns__namespace__queues_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/queues/workers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Who polled which queue, and when */
        get: operations["workers_v1_ns__namespace__queues_workers_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/queues/{name}/depth": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One queue's depth */
        get: operations["depth_v1_ns__namespace__queues__name__depth_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/quotas": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The namespace's quotas and current usage */
        get: operations["get_quotas_v1_ns__namespace__quotas_get"];
        /** Set the namespace's quotas */
        put: operations["put_quotas"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/schedules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every schedule of the namespace */
        get: operations["list_schedules_v1_ns__namespace__schedules_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/schedules/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One schedule: its spec, next fires, counters and recent fires */
        get: operations["get_schedule_v1_ns__namespace__schedules__name__get"];
        /** Create or update a schedule */
        put: operations["put_schedule"];
        post?: never;
        /** Delete a schedule; the runs it started go on */
        delete: operations["delete_schedule"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/schedules/{name}/backfill": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Fire the schedule's times of a past range, each once, under the overlap policy */
        post: operations["backfill_schedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/schedules/{name}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause a schedule: sets its spec.suspend, so nothing fires until it is resumed */
        post: operations["pause_schedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/schedules/{name}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume a schedule: clears spec.suspend; it goes on from now, without catching up the pause */
        post: operations["resume_schedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/schedules/{name}/trigger": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Fire now, under the overlap policy */
        post: operations["trigger_schedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/semaphores": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every semaphore: permits and how many are held */
        get: operations["semaphores_v1_ns__namespace__semaphores_get"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/semaphores/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One semaphore and the tasks holding it */
        get: operations["semaphore_v1_ns__namespace__semaphores__name__get"];
        /** Create or resize a semaphore */
        put: operations["put_semaphore"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List tasks, newest first: ?type=HUMAN&status=IN_PROGRESS&order=oldest is the HUMAN inbox
         * @description Every attempt of every task, filtered (AND) and paged as runs are.
         *     The HUMAN inbox is `type=HUMAN&status=IN_PROGRESS` (`order=oldest`: the
         *     longest waiting first); each item carries the task's input.
         */
        get: operations["list_tasks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/heartbeats": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Renew the leases of several tasks
         * @description `alive`: leases renewed. `gone`: tasks no longer leased under that epoch
         *     (completed elsewhere, timed out, canceled): stop working on them. Each
         *     heartbeat is validated on its own; an invalid one is listed in `errors`
         *     (code 422, naming the field) and the answer is 207.
         */
        post: operations["heartbeats_v1_ns__namespace__tasks_heartbeats_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/poll": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Lease tasks (long poll)
         * @description Lease up to `count` tasks of the given types, within each type's gates
         *     (concurrentExecLimit, rate limit, semaphores: the most restrictive wins).
         *     When none can be leased, the request is held open up to
         *     `pollTimeoutSeconds` (at most the task types' own pollTimeoutSeconds) and
         *     answered as soon as a task becomes leasable or a gate opens.
         */
        post: operations["poll_v1_ns__namespace__tasks_poll_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/results": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Report results of several tasks in one request
         * @description Each result is validated and applied on its own: one bad item never
         *     costs the others. 200 when every result was applied; 207 otherwise, with
         *     one outcome per item in the order sent: 200 applied, 404 unknown task,
         *     409 stale epoch or no longer leased, 422 the item is invalid (the message
         *     and `fields` name the field; nothing changed for it), 413 its output is
         *     over the namespace's payload limit: the task failed terminally with that
         *     reason. Only an invalid envelope refuses the whole request.
         *
         *     With `next`, the same request then leases up to `next.counts` tasks per
         *     type (within their gates, never waiting) into `tasks`: a worker hands a
         *     freed slot's result in and gets the slot's next task back in one round
         *     trip, and a gated slot goes back to a worker at the instant it is freed.
         */
        post: operations["report_results_v1_ns__namespace__tasks_results_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/{task_id}/complete": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Complete a HUMAN task with the person's output */
        post: operations["complete_v1_ns__namespace__tasks__task_id__complete_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/{task_id}/heartbeat": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Renew one lease
         * @description The body's `epoch` fences the lease; its `taskId` is ignored: the path names the task.
         */
        post: operations["heartbeat"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/{task_id}/logs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** What one task attempt logged */
        get: operations["task_logs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/{task_id}/reject": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Reject a HUMAN task: it fails terminally with the person's reason */
        post: operations["reject_v1_ns__namespace__tasks__task_id__reject_post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/{task_id}/result": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Report the result of one task
         * @description The path names the task; a `taskId` in the body may be left out, and
         *     must name the same task when it is there.
         */
        post: operations["report_result"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/tasks/{task_id}/why": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Why is this task not running? */
        get: operations["why_task"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ns/{namespace}/webhooks/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Deliver a webhook call (verified by its signature, not a token)
         * @description A call a third party makes. It needs no Kubernetes credential: it is
         *     verified against the Webhook's secret (HMAC of the body with a timestamp,
         *     GitHub's or Stripe's signature header, or a token header).
         */
        post: operations["deliver_v1_ns__namespace__webhooks__name__post"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** AuditEntry */
        AuditEntry: {
            /**
             * Actor
             * @description The authenticated identity (a user name; an API key by its Secret's name).
             */
            actor: string;
            /** At */
            at: string;
            /** Detail */
            detail?: {
                [key: string]: unknown;
            };
            /** Id */
            id: number;
            /**
             * Operation
             * @description start, terminate, pause, resume, retry, rerun, restart, decide, message, complete, reject or webhook.
             */
            operation: string;
            /**
             * Via
             * @description token, api-key, signature (webhooks) or anonymous (authentication off).
             */
            via: string;
        };
        /** AuditPage */
        AuditPage: {
            /** Entries */
            entries: components["schemas"]["AuditEntry"][];
            /**
             * Nextafter
             * @description Pass as `after` for the next page; null at the end.
             */
            nextAfter?: number | null;
        };
        /** BackfillRequest */
        BackfillRequest: {
            /**
             * Endtime
             * Format: date-time
             * @description The last fire time to fill, inclusive: not before startTime, not after now (else 422 naming endTime); the range holds at most 1000 of the schedule's fires.
             */
            endTime: string;
            /** @description Overrides the schedule's for these fires (AllowAll starts them all at once). */
            overlapPolicy?: components["schemas"]["OverlapPolicy"] | null;
            /**
             * Starttime
             * Format: date-time
             * @description The first fire time to fill, inclusive: an ISO 8601 instant from 1970, with a time zone.
             */
            startTime: string;
        };
        /**
         * DelaySource
         * @description Where a FAILED result's `retryAfterSeconds` came from.
         * @enum {string}
         */
        DelaySource: "hint" | "signal";
        /**
         * EnvVar
         * @description One environment variable of the worker container.
         */
        EnvVar: {
            /**
             * Name
             * @description Variable name; a name the operator injects (SLUICEWAY_URL, ...) overrides it.
             */
            name: string;
            /**
             * Value
             * @description Literal value. Default empty.
             * @default
             */
            value?: string;
        };
        /**
         * ErrorBody
         * @description Every refusal. A limit adds its `control` and the refusal's own fields
         *     (a quota: `quota`, `limit`, `current`, `retryAfterSeconds`).
         */
        ErrorBody: {
            /**
             * Error
             * @description A stable code: INVALID_REQUEST, NOT_FOUND, STALE_LEASE, LIMIT_EXCEEDED, ...
             */
            error: string;
            /**
             * Fields
             * @description INVALID_REQUEST: every invalid field.
             */
            fields?: components["schemas"]["FieldError"][] | null;
            /**
             * Message
             * @description What went wrong, naming the field or the control.
             */
            message: string;
        } & {
            [key: string]: unknown;
        };
        /** ExecutionView */
        ExecutionView: {
            /**
             * Archived
             * @description Read back from the archive: retention deleted the run, after writing its history to the archive (docs/retention.md).
             * @default false
             */
            archived?: boolean;
            /** Awaitingadmission */
            awaitingAdmission: boolean;
            /**
             * Chaindeadline
             * @description The chain's deadline: set at its first run, never moved.
             */
            chainDeadline?: string | null;
            /**
             * Chainid
             * @description Its continue-as-new chain: the id of the chain's first run.
             */
            chainId?: string | null;
            /** Correlationid */
            correlationId?: string | null;
            /**
             * Deadline
             * @description When timeoutSeconds ends the run (moved by pauses).
             */
            deadline?: string | null;
            /** Endtime */
            endTime?: string | null;
            /**
             * Expiresat
             * @description When retention deletes this finished run.
             */
            expiresAt?: string | null;
            /** Id */
            id: string;
            /** Input */
            input?: {
                [key: string]: unknown;
            };
            /** Namespace */
            namespace: string;
            /**
             * Nextrunid
             * @description The run that continues it, once it continued as new.
             */
            nextRunId?: string | null;
            /** Output */
            output?: {
                [key: string]: unknown;
            };
            /** Parentworkflowid */
            parentWorkflowId?: string | null;
            /** Pausereason */
            pauseReason?: string | null;
            /** Pausedat */
            pausedAt?: string | null;
            /**
             * Pausedseconds
             * @description Time spent paused, in seconds, over the run's life.
             * @default 0
             */
            pausedSeconds?: number;
            /**
             * Previousrunid
             * @description The run it continues as new, if any.
             */
            previousRunId?: string | null;
            /**
             * Priority
             * @description 1 (most urgent) to 5 (docs/priority.md).
             * @default 3
             */
            priority?: number;
            /** Quarantinereason */
            quarantineReason?: string | null;
            /**
             * Quarantinedat
             * @description Set while the decider cannot evaluate this run: it is set aside, alone, until it is terminated or released by forcing an evaluation (POST .../decide).
             */
            quarantinedAt?: string | null;
            /**
             * Reasonforincompletion
             * @default
             */
            reasonForIncompletion?: string;
            /** Requestid */
            requestId?: string | null;
            /**
             * Restartedfrom
             * @description The run this one restarted.
             */
            restartedFrom?: string | null;
            /**
             * Retries
             * @description How many times the run was retried or rerun.
             * @default 0
             */
            retries?: number;
            /**
             * Schedule
             * @description The Schedule that started it, if any.
             */
            schedule?: string | null;
            /** Searchattributes */
            searchAttributes?: {
                [key: string]: unknown;
            };
            /** Slabreachedat */
            slaBreachedAt?: string | null;
            /** Sladeadline */
            slaDeadline?: string | null;
            /**
             * Slaseconds
             * @default 0
             */
            slaSeconds?: number;
            /** Starttime */
            startTime: string;
            status: components["schemas"]["RunStatus"];
            /** Tasks */
            tasks?: components["schemas"]["TaskView"][];
            /** Workflowname */
            workflowName: string;
            /**
             * Workflowrun
             * @description The WorkflowRun object that started it, if any.
             */
            workflowRun?: string | null;
            /** Workflowversion */
            workflowVersion: number;
        };
        /** FieldError */
        FieldError: {
            /**
             * Field
             * @description The offending field, dotted (`callbackAfterSeconds`, `output.x`).
             */
            field: string;
            /** Message */
            message: string;
        };
        /** Heartbeat */
        Heartbeat: {
            /**
             * Epoch
             * @description The lease epoch, as leased.
             */
            epoch: number;
            /**
             * Logs
             * @description Lines logged since the last report, oldest first; stored bounded per task.
             */
            logs?: components["schemas"]["LogLine"][];
            /**
             * Taskid
             * @description A task id, as leased
             */
            taskId: string;
        };
        /** HeartbeatBatch */
        HeartbeatBatch: {
            /**
             * Heartbeats
             * @description Each heartbeat is validated on its own: an invalid one is listed in `errors`.
             */
            heartbeats: {
                /**
                 * Epoch
                 * @description The lease epoch, as leased.
                 */
                epoch: number;
                /**
                 * Logs
                 * @description Lines logged since the last report, oldest first; stored bounded per task.
                 */
                logs?: components["schemas"]["LogLine"][];
                /**
                 * Taskid
                 * @description A task id, as leased
                 */
                taskId: string;
            }[];
        };
        /** HeartbeatBatchResponse */
        HeartbeatBatchResponse: {
            /**
             * Alive
             * @description Leases renewed.
             */
            alive: string[];
            /**
             * Errors
             * @description Heartbeats refused as invalid (code 422), in the order sent.
             */
            errors?: components["schemas"]["ItemOutcome"][];
            /**
             * Gone
             * @description Tasks no longer leased under that epoch (completed elsewhere, timed out, canceled): stop working on them.
             */
            gone: string[];
        };
        /** HumanCompletion */
        HumanCompletion: {
            /**
             * Output
             * @description The task's output: the person's answer. As every payload: text (keys and values, at any depth) holds no NUL character or lone surrogate, integers fit in 64 bits, nesting is at most 64 levels (else 422 naming the field).
             */
            output?: {
                [key: string]: unknown;
            };
        };
        /** HumanRejection */
        HumanRejection: {
            /**
             * Output
             * @description The task's output. As every payload: text (keys and values, at any depth) holds no NUL character or lone surrogate, integers fit in 64 bits, nesting is at most 64 levels (else 422 naming the field).
             */
            output?: {
                [key: string]: unknown;
            };
            /**
             * Reason
             * @description Why; becomes the task's reason. Holds no NUL character or lone surrogate (else 422 naming the field).
             */
            reason: string;
        };
        /** ItemOutcome */
        ItemOutcome: {
            /**
             * Code
             * @description 200 accepted; 404 unknown task; 409 stale epoch or task no longer leased; 422 the item itself is invalid (the message names the field) and changed nothing.
             */
            code: number;
            /** Error */
            error?: string | null;
            /**
             * Fields
             * @description 422 only: every invalid field of the item.
             */
            fields?: components["schemas"]["FieldError"][] | null;
            /**
             * Taskid
             * @description The item's taskId as sent; null when it sent none.
             */
            taskId: string | null;
        };
        /** LeasedTask */
        LeasedTask: {
            /** Attempt */
            attempt: number;
            /**
             * Epoch
             * @description Fences this lease: results and heartbeats must carry it.
             */
            epoch: number;
            /** Executionid */
            executionId: string;
            /** Heartbeattimeoutseconds */
            heartbeatTimeoutSeconds: number;
            /** Input */
            input: {
                [key: string]: unknown;
            };
            /** Referencename */
            referenceName: string;
            /** Responsetimeoutseconds */
            responseTimeoutSeconds: number;
            /** Starttoclosetimeoutseconds */
            startToCloseTimeoutSeconds: number;
            /** Taskid */
            taskId: string;
            /** Tasktype */
            taskType: string;
            /**
             * Traceparent
             * @description W3C trace context of this attempt, when the operator exports traces: a worker's spans continue it, joining the run's trace.
             */
            traceparent?: string | null;
        };
        /** LogEntry */
        LogEntry: {
            /**
             * At
             * @description When the server stored it.
             */
            at: string;
            /** Attempt */
            attempt: number;
            /**
             * Id
             * @description Increasing: pass the last one seen as `after` to follow.
             */
            id: number;
            /** Level */
            level: string;
            /**
             * Loggedat
             * @description When the worker logged it, by its clock.
             */
            loggedAt?: string | null;
            /** Message */
            message: string;
            /** Referencename */
            referenceName: string;
            /** Taskid */
            taskId: string;
        };
        /**
         * LogLine
         * @description One line a handler logged. Lines too long are cut rather than refused:
         *     a log must never cost a result.
         */
        LogLine: {
            /**
             * At
             * @description When the worker logged it (its clock), ISO 8601.
             */
            at?: string | null;
            /**
             * Level
             * @default INFO
             */
            level?: string;
            /**
             * Message
             * @default
             */
            message?: string;
        };
        /** LogPage */
        LogPage: {
            /** Lines */
            lines: components["schemas"]["LogEntry"][];
            /**
             * Nextafter
             * @description The `after` for the next request (null: no line yet).
             */
            nextAfter?: number | null;
            /**
             * Truncated
             * @description A task logged more than is kept: its later lines were dropped.
             * @default false
             */
            truncated?: boolean;
        };
        /**
         * NextLease
         * @description Lease more tasks in the same round trip as the results: the slots those
         *     results free go straight back to the worker that freed them.
         */
        NextLease: {
            /**
             * Counts
             * @description Most tasks to lease per task type, within each type's gates; never waits for one.
             */
            counts: {
                [key: string]: number;
            };
            /**
             * Workerid
             * @description Stable identity of the worker.
             */
            workerId: string;
        };
        /** OperationResponse */
        OperationResponse: {
            /** Id */
            id: string;
            /**
             * Message
             * @default
             */
            message?: string;
            status: components["schemas"]["RunStatus"];
        };
        /**
         * Order
         * @enum {string}
         */
        Order: "newest" | "oldest";
        /**
         * OverlapPolicy
         * @description What a fire does while an earlier run of the schedule still runs.
         *     Temporal's six; Kubernetes' and Argo's names are accepted for theirs.
         * @enum {string}
         */
        OverlapPolicy: "Skip" | "BufferOne" | "BufferAll" | "CancelOther" | "TerminateOther" | "AllowAll" | "Forbid" | "Replace" | "Allow";
        /** PauseRequest */
        PauseRequest: {
            /**
             * Reason
             * @description Why; shown by `why` and in the run.
             * @default
             */
            reason?: string;
        };
        /** PollRequest */
        PollRequest: {
            /**
             * Count
             * @description Most tasks to lease in one response.
             * @default 1
             */
            count?: number;
            /**
             * Polltimeoutseconds
             * @description How long to hold the poll open when nothing is ready; the task type's pollTimeoutSeconds (default 30) when unset.
             */
            pollTimeoutSeconds?: number | null;
            /**
             * Tasktypes
             * @description Queues to lease from, each once.
             */
            taskTypes: string[];
            /**
             * Workerid
             * @description Stable identity of the polling worker.
             */
            workerId: string;
        };
        /** PollResponse */
        PollResponse: {
            /** Tasks */
            tasks: components["schemas"]["LeasedTask"][];
        };
        /**
         * QuotaSpec
         * @description Namespace limits (absent: unlimited, or the operator's), and where its system tasks may reach.
         */
        QuotaSpec: {
            /**
             * Allowedegress
             * @description Destinations this namespace's HTTP, HTTP_POLL, WEBHOOK and GRPC tasks may reach although the egress policy denies them by default: host names, `*.suffix`, IP addresses or CIDRs. An entry with `/` or `:`, or only digits and dots, must be an IPv4 or IPv6 address or network; `*` only as a leading `*.` (else 422 naming allowedEgress).
             */
            allowedEgress?: string[];
            /**
             * Dispatchweight
             * @description This namespace's share of the operator's system-task slots (HTTP, WEBHOOK, GRPC) when several namespaces have calls waiting, against the others' weights (default 1).
             */
            dispatchWeight?: number | null;
            /** Maxconcurrentexecutions */
            maxConcurrentExecutions?: number | null;
            /** Maxexecutionsperminute */
            maxExecutionsPerMinute?: number | null;
            /**
             * Maxpayloadbytes
             * @description The largest run input or output, task output, message or webhook body, in bytes of JSON; lowers the operator's limit (SLUICEWAY_MAX_PAYLOAD_BYTES) for this namespace, never raises it. Applies from the request after the Quota is stored (Ready): at once on the replica that stored it, within milliseconds on the others (at most 5 s while one's notification connection is down).
             */
            maxPayloadBytes?: number | null;
            /** Maxschedules */
            maxSchedules?: number | null;
            /** Maxworkflowdefinitions */
            maxWorkflowDefinitions?: number | null;
        };
        /** RerunRequest */
        RerunRequest: {
            /**
             * Input
             * @description Merged over the task's resolved inputParameters when it starts again.
             */
            input?: {
                [key: string]: unknown;
            } | null;
            /**
             * Taskreferencename
             * @description Run again from this task: it and every task after it start afresh; the others keep their outputs. A task of this run that ran (else 422 naming taskReferenceName).
             */
            taskReferenceName: string;
        };
        /** RestartRequest */
        RestartRequest: {
            /**
             * Input
             * @description The new run's input; the old run's when unset.
             */
            input?: {
                [key: string]: unknown;
            } | null;
            /**
             * Latestversion
             * @description Run the workflow's latest version, not the old run's.
             * @default false
             */
            latestVersion?: boolean;
            /** Requestid */
            requestId?: string | null;
        };
        /** ResultBatch */
        ResultBatch: {
            /** @description Lease up to these counts once the results are applied; the leases come back in `tasks`. Requires `poll` on those task types. */
            next?: components["schemas"]["NextLease"] | null;
            /**
             * Results
             * @description Each result is validated on its own: an invalid one gets a 422 outcome, the others apply.
             */
            results: {
                /**
                 * Callbackafterseconds
                 * @description IN_PROGRESS only: snooze; hand the task back and lease it again after this delay without spending an attempt.
                 */
                callbackAfterSeconds?: number | null;
                /**
                 * Epoch
                 * @description The lease epoch, as leased.
                 */
                epoch: number;
                /**
                 * Logs
                 * @description Lines logged since the last report, oldest first; stored bounded per task.
                 */
                logs?: components["schemas"]["LogLine"][];
                /** Output */
                output?: {
                    [key: string]: unknown;
                };
                /**
                 * Reason
                 * @description Why it failed; matched against nonRetryableErrors.
                 * @default
                 */
                reason?: string;
                /**
                 * Retryafterseconds
                 * @description FAILED only: retry after exactly this delay (never jittered), still spending an attempt, and at least 1 s. As a `hint` (default: a server's Retry-After) it is clamped by the operator's maxRetryBackoff; as a `signal` only scheduleToCloseTimeout gates it.
                 */
                retryAfterSeconds?: number | null;
                /**
                 * @description What `retryAfterSeconds` is: a classifier's `hint` or the handler's `signal`.
                 * @default hint
                 */
                retryAfterSource?: components["schemas"]["DelaySource"];
                /** @description FAILED only: this failure's verdict, overriding the TaskDefinition's retryKind: `indefinite` retries with no attempt ceiling until the task's deadline; `nonRetryable` is final; `transient` spends retryCount. */
                retryKind?: components["schemas"]["RetryKind"] | null;
                /**
                 * Searchattributes
                 * @description Upsert these declared attributes of the task's run.
                 */
                searchAttributes?: {
                    [key: string]: unknown;
                };
                status: components["schemas"]["ResultStatus"];
                /**
                 * Taskid
                 * @description A task id, as leased
                 */
                taskId: string;
            }[];
        };
        /** ResultBatchResponse */
        ResultBatchResponse: {
            /**
             * Results
             * @description One outcome per result, in the order sent.
             */
            results: components["schemas"]["ItemOutcome"][];
            /**
             * Tasks
             * @description What `next` leased (absent when not asked).
             */
            tasks?: components["schemas"]["LeasedTask"][] | null;
        };
        /**
         * ResultStatus
         * @enum {string}
         */
        ResultStatus: "COMPLETED" | "FAILED" | "FAILED_WITH_TERMINAL_ERROR" | "IN_PROGRESS" | "INTERRUPTED";
        /**
         * RetryKind
         * @description How failures are retried (the TaskQ reference's retry kinds).
         * @enum {string}
         */
        RetryKind: "transient" | "indefinite" | "nonRetryable";
        /**
         * RetryLogic
         * @enum {string}
         */
        RetryLogic: "FIXED" | "LINEAR_BACKOFF" | "EXPONENTIAL_BACKOFF";
        /** RunPage */
        RunPage: {
            /** Items */
            items: components["schemas"]["RunSummary"][];
            /**
             * Nextcursor
             * @description Pass as `cursor` for the next page; null on the last.
             */
            nextCursor?: string | null;
        };
        /**
         * RunStatus
         * @description PAUSED is a running run that schedules nothing new: stored as RUNNING
         *     with a pause time, shown as PAUSED.
         * @enum {string}
         */
        RunStatus: "RUNNING" | "PAUSED" | "COMPLETED" | "FAILED" | "TIMED_OUT" | "TERMINATED";
        /**
         * RunSummary
         * @description A run as lists show it: narrow columns only, never input or output.
         */
        RunSummary: {
            /**
             * Awaitingadmission
             * @default false
             */
            awaitingAdmission?: boolean;
            /** Correlationid */
            correlationId?: string | null;
            /** Endtime */
            endTime?: string | null;
            /** Id */
            id: string;
            /** Parentworkflowid */
            parentWorkflowId?: string | null;
            /** Pausedat */
            pausedAt?: string | null;
            /**
             * Priority
             * @description 1 (most urgent) to 5 (docs/priority.md).
             * @default 3
             */
            priority?: number;
            /**
             * Quarantined
             * @default false
             */
            quarantined?: boolean;
            /**
             * Reasonforincompletion
             * @default
             */
            reasonForIncompletion?: string;
            /** Searchattributes */
            searchAttributes?: {
                [key: string]: unknown;
            };
            /** Slabreachedat */
            slaBreachedAt?: string | null;
            /** Starttime */
            startTime: string;
            status: components["schemas"]["RunStatus"];
            /** Workflowname */
            workflowName: string;
            /**
             * Workflowrun
             * @description The WorkflowRun object that started it, if any.
             */
            workflowRun?: string | null;
            /** Workflowversion */
            workflowVersion: number;
        };
        /**
         * ScheduleSpec
         * @description When to start runs of a workflow, and what to do when they overlap.
         */
        ScheduleSpec: {
            /**
             * Catchupwindowseconds
             * @description After an outage, fires missed by at most this many seconds are started (under the overlap policy); older ones are skipped and counted. Default 60.
             * @default 60
             */
            catchupWindowSeconds?: number;
            /**
             * Correlationid
             * @description The correlationId of every run.
             */
            correlationId?: string | null;
            /**
             * Cron
             * @description Cron expressions (minute hour day-of-month month day-of-week, or @hourly, @daily, @weekly, @monthly, @yearly); the schedule fires at each time any of them matches.
             */
            cron?: string[];
            /**
             * Endat
             * @description No fire after this instant.
             */
            endAt?: string | null;
            /**
             * Every
             * @description An interval instead of cron: `30s`, `5m`, `1h 30m`. Fires at multiples of it since the Unix epoch, plus `offset`.
             */
            every?: string | null;
            /**
             * Input
             * @description The input of every run it starts.
             */
            input?: {
                [key: string]: unknown;
            };
            /**
             * Jitterseconds
             * @description Delay each fire by up to this many seconds, the same on every replica (derived from the schedule and the fire time), so many schedules on one time do not start together.
             * @default 0
             */
            jitterSeconds?: number;
            /**
             * Keephistory
             * @description Recent fires listed in the status.
             * @default 10
             */
            keepHistory?: number;
            /**
             * Maxruns
             * @description Stop after starting this many scheduled runs (triggers and backfills do not count).
             */
            maxRuns?: number | null;
            /**
             * Offset
             * @description With `every`: shifts each fire, e.g. `every: 1h`, `offset: 15m` fires at a quarter past.
             */
            offset?: string | null;
            /**
             * @description While an earlier run of this schedule runs: Skip (default), BufferOne, BufferAll, CancelOther, TerminateOther or AllowAll (Forbid, Replace and Allow are read as Skip, TerminateOther and AllowAll).
             * @default Skip
             */
            overlapPolicy?: components["schemas"]["OverlapPolicy"];
            /**
             * Priority
             * @description The priority of every run, 1 (most urgent) to 5; the workflow's when unset.
             */
            priority?: number | null;
            /**
             * Searchattributes
             * @description Search attributes of every run it starts, checked against the workflow's declarations as a start's are: a value that does not fit refuses that fire, naming the attribute.
             */
            searchAttributes?: {
                [key: string]: unknown;
            };
            /**
             * Startat
             * @description No fire before this instant.
             */
            startAt?: string | null;
            /**
             * Suspend
             * @description Fire nothing while true; on resume the schedule goes on from then.
             * @default false
             */
            suspend?: boolean;
            /**
             * Timezone
             * @description IANA time zone the cron expressions are read in. A clock time skipped by a daylight-saving change does not fire that day; one the clock shows twice fires twice.
             * @default UTC
             */
            timezone?: string;
            /**
             * Version
             * @description Pinned version; the latest when unset.
             */
            version?: number | null;
            /**
             * Workflow
             * @description The Workflow to start (its spec.name or metadata.name).
             */
            workflow: string;
        };
        /**
         * SemaphoreBody
         * @description `{"permits": 4}`.
         */
        SemaphoreBody: {
            /**
             * Name
             * @description Semaphore name TaskDefinitions refer to. Defaults to metadata.name.
             */
            name?: string | null;
            /**
             * Permits
             * @description Leases that may hold it at once.
             */
            permits: number;
        };
        /**
         * SingleResult
         * @description The result of the task its path names.
         */
        SingleResult: {
            /**
             * Callbackafterseconds
             * @description IN_PROGRESS only: snooze; hand the task back and lease it again after this delay without spending an attempt.
             */
            callbackAfterSeconds?: number | null;
            /**
             * Epoch
             * @description The lease epoch, as leased.
             */
            epoch: number;
            /**
             * Logs
             * @description Lines logged since the last report, oldest first; stored bounded per task.
             */
            logs?: components["schemas"]["LogLine"][];
            /** Output */
            output?: {
                [key: string]: unknown;
            };
            /**
             * Reason
             * @description Why it failed; matched against nonRetryableErrors.
             * @default
             */
            reason?: string;
            /**
             * Retryafterseconds
             * @description FAILED only: retry after exactly this delay (never jittered), still spending an attempt, and at least 1 s. As a `hint` (default: a server's Retry-After) it is clamped by the operator's maxRetryBackoff; as a `signal` only scheduleToCloseTimeout gates it.
             */
            retryAfterSeconds?: number | null;
            /**
             * @description What `retryAfterSeconds` is: a classifier's `hint` or the handler's `signal`.
             * @default hint
             */
            retryAfterSource?: components["schemas"]["DelaySource"];
            /** @description FAILED only: this failure's verdict, overriding the TaskDefinition's retryKind: `indefinite` retries with no attempt ceiling until the task's deadline; `nonRetryable` is final; `transient` spends retryCount. */
            retryKind?: components["schemas"]["RetryKind"] | null;
            /**
             * Searchattributes
             * @description Upsert these declared attributes of the task's run.
             */
            searchAttributes?: {
                [key: string]: unknown;
            };
            status: components["schemas"]["ResultStatus"];
            /**
             * Taskid
             * @description May be left out: the path names the task. If sent, the same.
             */
            taskId?: string | null;
        };
        /**
         * StartBatch
         * @description Many starts in one request, each validated and judged on its own.
         */
        StartBatch: {
            /**
             * Starts
             * @description Each start is validated on its own: an invalid one gets a 422 outcome, the others start.
             */
            starts: {
                /** Correlationid */
                correlationId?: string | null;
                /** Input */
                input?: {
                    [key: string]: unknown;
                };
                /**
                 * Name
                 * @description The workflow to run.
                 */
                name: string;
                /**
                 * Priority
                 * @description 1 (most urgent) to 5: its tasks are leased before less urgent ones of their type that became ready up to a minute per level earlier (docs/priority.md). The workflow's priority (else 3) when unset.
                 */
                priority?: number | null;
                /** Requestid */
                requestId?: string | null;
                /**
                 * Searchattributes
                 * @description Values of the attributes the workflow declares, by name: an undeclared name, or a value that does not fit its declared type, is refused (422 naming it).
                 */
                searchAttributes?: {
                    [key: string]: unknown;
                };
                /**
                 * Slaseconds
                 * @description This run's soft SLA, overriding the workflow's slaSeconds (0: none), clamped down to its timeoutSeconds.
                 */
                slaSeconds?: number | null;
                /**
                 * Taskoverrides
                 * @description Per task reference: retryCount and startToCloseTimeout for this run only (a DO_WHILE's inner reference covers every iteration; a FORK_JOIN_DYNAMIC's covers its branches). References the workflow does not have are refused (422 naming them).
                 */
                taskOverrides?: {
                    [key: string]: components["schemas"]["TaskOverride"];
                };
                /**
                 * Version
                 * @description Pinned version; the latest when unset.
                 */
                version?: number | null;
            }[];
        };
        /** StartBatchResponse */
        StartBatchResponse: {
            /**
             * Starts
             * @description One outcome per start, in the order sent.
             */
            starts: components["schemas"]["StartItemOutcome"][];
        };
        /**
         * StartItemOutcome
         * @description One start of a batch: `code` as the single start would have answered.
         */
        StartItemOutcome: {
            /** Awaitingadmission */
            awaitingAdmission?: boolean | null;
            /**
             * Code
             * @description 201 started; 200 a retried start (same requestId) found its run; 404 no such workflow; 409 LIMIT_EXCEEDED or IDEMPOTENCY_KEY_REUSED; 413 the input is over the payload limit; 422 the item is invalid (`fields` names each field); 429 a namespace quota. Anything but 200 and 201 started nothing.
             */
            code: number;
            /** Created */
            created?: boolean | null;
            /**
             * Error
             * @description The refusal's code; the item carries the single start's whole error body (a quota's `quota`, `limit`, `current`, `retryAfterSeconds`, ...).
             */
            error?: string | null;
            /** Fields */
            fields?: components["schemas"]["FieldError"][] | null;
            /** Id */
            id?: string | null;
            /** Message */
            message?: string | null;
            status?: components["schemas"]["RunStatus"] | null;
        };
        /** StartRequest */
        StartRequest: {
            /** Correlationid */
            correlationId?: string | null;
            /** Input */
            input?: {
                [key: string]: unknown;
            };
            /**
             * Name
             * @description The workflow to run.
             */
            name: string;
            /**
             * Priority
             * @description 1 (most urgent) to 5: its tasks are leased before less urgent ones of their type that became ready up to a minute per level earlier (docs/priority.md). The workflow's priority (else 3) when unset.
             */
            priority?: number | null;
            /** Requestid */
            requestId?: string | null;
            /**
             * Searchattributes
             * @description Values of the attributes the workflow declares, by name: an undeclared name, or a value that does not fit its declared type, is refused (422 naming it).
             */
            searchAttributes?: {
                [key: string]: unknown;
            };
            /**
             * Slaseconds
             * @description This run's soft SLA, overriding the workflow's slaSeconds (0: none), clamped down to its timeoutSeconds.
             */
            slaSeconds?: number | null;
            /**
             * Taskoverrides
             * @description Per task reference: retryCount and startToCloseTimeout for this run only (a DO_WHILE's inner reference covers every iteration; a FORK_JOIN_DYNAMIC's covers its branches). References the workflow does not have are refused (422 naming them).
             */
            taskOverrides?: {
                [key: string]: components["schemas"]["TaskOverride"];
            };
            /**
             * Version
             * @description Pinned version; the latest when unset.
             */
            version?: number | null;
        };
        /** StartResponse */
        StartResponse: {
            /**
             * Awaitingadmission
             * @default false
             */
            awaitingAdmission?: boolean;
            /**
             * Created
             * @description False when a retried start (same requestId) found its run.
             * @default true
             */
            created?: boolean;
            /** Id */
            id: string;
            /** Restartedfrom */
            restartedFrom?: string | null;
            status: components["schemas"]["RunStatus"];
        };
        /**
         * TaskDefinitionBody
         * @description A task definition in the reference's JSON shape: its name, then the policy.
         */
        TaskDefinitionBody: {
            /**
             * Backoffscalefactor
             * @description Growth factor of the two backoff shapes. Default 2.
             */
            backoffScaleFactor?: number | null;
            /**
             * Concurrentexeclimit
             * @description Cap on in-flight tasks of this type across every run, enforced at dequeue; 0 is unlimited.
             * @default 0
             */
            concurrentExecLimit?: number;
            /**
             * Description
             * @default
             */
            description?: string;
            /**
             * Heartbeattimeout
             * @description Longest gap between heartbeats of a leased task. Seconds; 0 arms no timer.
             * @default 0
             */
            heartbeatTimeout?: number;
            /**
             * Jitter
             * @description Proportional randomisation of the delay (0.2 is ±20%). Default 0.2.
             */
            jitter?: number | null;
            /**
             * Maxretrydelayseconds
             * @description Hard ceiling on any computed delay, applied before and after jitter. Default 3600.
             */
            maxRetryDelaySeconds?: number | null;
            /**
             * Name
             * @description The task type.
             */
            name: string;
            /**
             * Nonretryableerrors
             * @description Substrings of a failure reason that must never be retried, each listed once.
             */
            nonRetryableErrors?: string[] | null;
            /**
             * Polltimeoutseconds
             * @description How long the server may hold a worker's poll open. Default 30.
             * @default 30
             */
            pollTimeoutSeconds?: number;
            /**
             * Ratelimitfrequencyseconds
             * @description Size of the fixed rate-limit window in seconds. Default 1.
             * @default 1
             */
            rateLimitFrequencySeconds?: number;
            /**
             * Ratelimitperfrequency
             * @description Dispatches allowed per fixed window of rateLimitFrequencySeconds; 0 is unlimited.
             * @default 0
             */
            rateLimitPerFrequency?: number;
            /**
             * Responsetimeoutseconds
             * @description Lease duration; a heartbeat renews it. Default 3600.
             * @default 3600
             */
            responseTimeoutSeconds?: number;
            /**
             * Retrybudget
             * @description Maximum share of the last 300 s of executions that may be retries; never trips under 20 executions; 1 disables. Default 0.3.
             */
            retryBudget?: number | null;
            /**
             * Retrycount
             * @description Attempts after the first; 0 runs once. Default 3.
             */
            retryCount?: number | null;
            /**
             * Retrydelayseconds
             * @description The base delay in seconds. Default 1.
             */
            retryDelaySeconds?: number | null;
            /** @description transient (default): at most retryCount retries. indefinite: retry on the backoff curve with no attempt ceiling (and outside the retry budget) until scheduleToCloseTimeout or timeBudgetSeconds. nonRetryable: the first failure is final. */
            retryKind?: components["schemas"]["RetryKind"] | null;
            /** @description FIXED, LINEAR_BACKOFF or EXPONENTIAL_BACKOFF. Default EXPONENTIAL_BACKOFF. */
            retryLogic?: components["schemas"]["RetryLogic"] | null;
            /**
             * Scheduletoclosetimeout
             * @description Deadline across all attempts and backoff sleeps; a retry that would land past it fails the task with DeadlineExceeded. Seconds; 0 arms no timer.
             * @default 0
             */
            scheduleToCloseTimeout?: number;
            /**
             * Scheduletostarttimeout
             * @description Enqueued until leased: a starved queue. Seconds; 0 arms no timer.
             * @default 0
             */
            scheduleToStartTimeout?: number;
            /**
             * Semaphores
             * @description Named semaphores a lease must acquire, all or nothing, each listed once. An unconfigured one gates nothing.
             */
            semaphores?: string[];
            /**
             * Starttoclosetimeout
             * @description Leased until terminal: a slow or wedged worker. Seconds; 0 arms no timer. Default 0.
             */
            startToCloseTimeout?: number | null;
            /**
             * Timebudgetseconds
             * @description indefinite only: the task's deadline is its first scheduling plus this budget, computed by the database when the task is inserted (the earlier of it and scheduleToCloseTimeout wins).
             */
            timeBudgetSeconds?: number | null;
            /**
             * @description What a missed task deadline means: TIME_OUT_WF (default), RETRY or ALERT_ONLY.
             * @default TIME_OUT_WF
             */
            timeoutPolicy?: components["schemas"]["TimeoutPolicy"];
            /**
             * Timeoutseconds
             * @description Scheduled through to terminal: the total budget of one attempt. Seconds; 0 arms no timer.
             * @default 0
             */
            timeoutSeconds?: number;
            /** @description Worker pods the operator runs for this task type, as a Deployment it owns. */
            workers?: components["schemas"]["WorkerPodsSpec"] | null;
        };
        /**
         * TaskOverride
         * @description What one start may change about one task of its run: the highest
         *     precedence, above the workflow task and the TaskDefinition, within the
         *     same bounds.
         */
        TaskOverride: {
            /**
             * Retrycount
             * @description Attempts after the first, for this run.
             */
            retryCount?: number | null;
            /**
             * Starttoclosetimeout
             * @description Seconds from lease to result, for this run; 0 arms no timer.
             */
            startToCloseTimeout?: number | null;
        };
        /** TaskPage */
        TaskPage: {
            /** Items */
            items: components["schemas"]["TaskSummary"][];
            /** Nextcursor */
            nextCursor?: string | null;
        };
        /** TaskResult */
        TaskResult: {
            /**
             * Callbackafterseconds
             * @description IN_PROGRESS only: snooze; hand the task back and lease it again after this delay without spending an attempt.
             */
            callbackAfterSeconds?: number | null;
            /**
             * Epoch
             * @description The lease epoch, as leased.
             */
            epoch: number;
            /**
             * Logs
             * @description Lines logged since the last report, oldest first; stored bounded per task.
             */
            logs?: components["schemas"]["LogLine"][];
            /** Output */
            output?: {
                [key: string]: unknown;
            };
            /**
             * Reason
             * @description Why it failed; matched against nonRetryableErrors.
             * @default
             */
            reason?: string;
            /**
             * Retryafterseconds
             * @description FAILED only: retry after exactly this delay (never jittered), still spending an attempt, and at least 1 s. As a `hint` (default: a server's Retry-After) it is clamped by the operator's maxRetryBackoff; as a `signal` only scheduleToCloseTimeout gates it.
             */
            retryAfterSeconds?: number | null;
            /**
             * @description What `retryAfterSeconds` is: a classifier's `hint` or the handler's `signal`.
             * @default hint
             */
            retryAfterSource?: components["schemas"]["DelaySource"];
            /** @description FAILED only: this failure's verdict, overriding the TaskDefinition's retryKind: `indefinite` retries with no attempt ceiling until the task's deadline; `nonRetryable` is final; `transient` spends retryCount. */
            retryKind?: components["schemas"]["RetryKind"] | null;
            /**
             * Searchattributes
             * @description Upsert these declared attributes of the task's run.
             */
            searchAttributes?: {
                [key: string]: unknown;
            };
            status: components["schemas"]["ResultStatus"];
            /**
             * Taskid
             * @description A task id, as leased
             */
            taskId: string;
        };
        /** TaskSummary */
        TaskSummary: {
            /** Attempt */
            attempt: number;
            /**
             * Completedby
             * @description HUMAN: who completed or rejected it.
             */
            completedBy?: string | null;
            /** Endedat */
            endedAt?: string | null;
            /** Executionid */
            executionId: string;
            /**
             * Input
             * @description The task's input: for a HUMAN task, what the person decides on.
             */
            input?: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description 1 (most urgent) to 5 (docs/priority.md).
             * @default 3
             */
            priority?: number;
            /**
             * Reason
             * @default
             */
            reason?: string;
            /** Referencename */
            referenceName: string;
            /** Scheduledat */
            scheduledAt: string;
            /** Startedat */
            startedAt?: string | null;
            /** Status */
            status: string;
            /** Taskid */
            taskId: string;
            /** Tasktype */
            taskType: string;
            /** Type */
            type: string;
            /** Workerid */
            workerId?: string | null;
            /**
             * Workflowname
             * @description The workflow of the task's run.
             */
            workflowName?: string | null;
        };
        /**
         * TaskType
         * @enum {string}
         */
        TaskType: "SIMPLE" | "FORK_JOIN" | "FORK_JOIN_DYNAMIC" | "JOIN" | "SWITCH" | "WAIT" | "INLINE" | "TERMINATE" | "SUB_WORKFLOW" | "HTTP" | "HTTP_POLL" | "DO_WHILE" | "WAIT_FOR_WEBHOOK" | "HUMAN" | "PULL_WORKFLOW_MESSAGES" | "GRPC" | "WEBHOOK" | "CONTINUE_AS_NEW" | "CONTAINER";
        /** TaskView */
        TaskView: {
            /** Attempt */
            attempt: number;
            /** Availableat */
            availableAt: string;
            /**
             * Completedby
             * @description HUMAN: who completed or rejected it.
             */
            completedBy?: string | null;
            /** Endedat */
            endedAt?: string | null;
            /** Input */
            input?: {
                [key: string]: unknown;
            };
            /**
             * Interruptcount
             * @description Graceful worker shutdowns that handed this task back.
             * @default 0
             */
            interruptCount?: number;
            /**
             * Iteration
             * @description Its iteration of that DO_WHILE, 1-based.
             */
            iteration?: number | null;
            /**
             * Loop
             * @description The DO_WHILE this task belongs to, if any.
             */
            loop?: string | null;
            /** Output */
            output?: {
                [key: string]: unknown;
            };
            /**
             * Priority
             * @description 1 (most urgent) to 5 (docs/priority.md).
             * @default 3
             */
            priority?: number;
            /**
             * Reason
             * @default
             */
            reason?: string;
            /** Referencename */
            referenceName: string;
            /** Scheduledat */
            scheduledAt: string;
            /**
             * Snoozecount
             * @description Snoozes of this attempt: each handed the task back, attempt refunded.
             * @default 0
             */
            snoozeCount?: number;
            /** Startedat */
            startedAt?: string | null;
            /** Status */
            status: string;
            /** Subworkflowid */
            subWorkflowId?: string | null;
            /**
             * Superseded
             * @description A retry or rerun started this task afresh after this attempt.
             * @default false
             */
            superseded?: boolean;
            /** Taskid */
            taskId: string;
            /** Tasktype */
            taskType: string;
            /** Type */
            type: string;
            /** Workerid */
            workerId?: string | null;
        };
        /** TerminateRequest */
        TerminateRequest: {
            /**
             * Reason
             * @default terminated by request
             */
            reason?: string;
        };
        /**
         * TimeoutPolicy
         * @enum {string}
         */
        TimeoutPolicy: "TIME_OUT_WF" | "RETRY" | "ALERT_ONLY";
        /** TriggerRequest */
        TriggerRequest: {
            /** @description Overrides the schedule's for this fire. */
            overlapPolicy?: components["schemas"]["OverlapPolicy"] | null;
        };
        /** WaitingTaskView */
        WaitingTaskView: {
            /** Attempt */
            attempt: number;
            /** Completedby */
            completedBy?: string | null;
            /** Endedat */
            endedAt?: string | null;
            /** Executionid */
            executionId: string;
            /** Input */
            input?: {
                [key: string]: unknown;
            };
            /** Output */
            output?: {
                [key: string]: unknown;
            };
            /**
             * Reason
             * @default
             */
            reason?: string;
            /** Referencename */
            referenceName: string;
            /** Scheduledat */
            scheduledAt: string;
            /** Status */
            status: string;
            /** Taskid */
            taskId: string;
            /** Tasktype */
            taskType: string;
            /** Type */
            type: string;
            /** Workflowname */
            workflowName: string;
        };
        /**
         * WorkerAutoscaling
         * @description Replicas follow queue depth, bounded by the gates of the task type (docs/worker-pods.md).
         */
        WorkerAutoscaling: {
            /**
             * Maxreplicas
             * @description Most replicas: at least minReplicas (else 422 naming maxReplicas). The operator also never runs more than the gates can admit: ceil(concurrentExecLimit / concurrency) and ceil(smallest semaphore's permits / concurrency).
             */
            maxReplicas: number;
            /**
             * Minreplicas
             * @description Fewest replicas, even with an empty queue; 0 scales to zero. Default 1.
             * @default 1
             */
            minReplicas?: number;
            /**
             * Targettasksperreplica
             * @description Ready plus in-flight tasks one replica should take; desired replicas are ceil((ready + inFlight) / targetTasksPerReplica). Default: concurrency.
             */
            targetTasksPerReplica?: number | null;
        };
        /**
         * WorkerPodsSpec
         * @description A Deployment of worker pods for this task type, run by the operator.
         */
        WorkerPodsSpec: {
            /**
             * Args
             * @description Arguments to the entrypoint, e.g. [worker, app.workers, --concurrency, '4'].
             */
            args?: string[] | null;
            /** @description Scale replicas by queue depth between minReplicas and maxReplicas. */
            autoscaling?: components["schemas"]["WorkerAutoscaling"] | null;
            /**
             * Command
             * @description Entrypoint override; unset runs the image's own entrypoint.
             */
            command?: string[] | null;
            /**
             * Concurrency
             * @description Tasks one pod runs at once; autoscaling divides the gate ceilings by it. Default 1.
             * @default 1
             */
            concurrency?: number;
            /**
             * Env
             * @description Extra environment variables of the worker container, unique by name (else 422 naming env).
             */
            env?: components["schemas"]["EnvVar"][] | null;
            /**
             * Image
             * @description Container image of the worker. Default: the operator's SLUICEWAY_WORKER_IMAGE.
             */
            image?: string | null;
            /**
             * Replicas
             * @description Number of worker pods when autoscaling is not set (ignored when it is). Default 1.
             * @default 1
             */
            replicas?: number;
            /** @description CPU and memory requests and limits of the worker container. */
            resources?: components["schemas"]["WorkerResources"] | null;
            /**
             * Serviceaccountname
             * @description ServiceAccount the pods run as; its projected token is the worker's credential. Default `default`.
             * @default default
             */
            serviceAccountName?: string;
        };
        /**
         * WorkerResources
         * @description Compute resources of the worker container, as in a Pod's `resources`.
         */
        WorkerResources: {
            /**
             * Limits
             * @description Maximum resources, e.g. {memory: 512Mi}. Quantities are strings.
             */
            limits?: {
                [key: string]: string;
            } | null;
            /**
             * Requests
             * @description Minimum resources, e.g. {cpu: 250m, memory: 256Mi}. Quantities are strings.
             */
            requests?: {
                [key: string]: string;
            } | null;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz_healthz_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: string;
                    };
                };
            };
        };
    };
    metrics_metrics_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
        };
    };
    readyz_readyz_get: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description PostgreSQL does not answer: `{status, reason}` */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
    list_events_v1_ns__namespace__events_get: {
        parameters: {
            query?: {
                /** @description Only events of this name */
                event?: string | null;
                /** @description Only events for which some Trigger had this outcome (or `unmatched`: none listened) */
                outcome?: string | null;
                limit?: number;
                /** @description Opaque: only the `nextCursor` of the previous page of this list, in the same order, is read; any other string is refused (422 naming `cursor`). */
                cursor?: string | null;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_event_v1_ns__namespace__events__event_record_id__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                event_record_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such event (or older than the event retention) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    publish_v1_ns__namespace__events__name__post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The event as recorded: `{id, event, eventId, outcome, outcomes}`, one outcome per Trigger (started, duplicate, filtered, refused, invalid), or `unmatched` when none listens */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description The payload is larger than the namespace's payload limit: {field, size, limit, limitSource} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_runs: {
        parameters: {
            query?: {
                workflow?: string | null;
                version?: number | null;
                /** @description Repeat or comma-separate */
                status?: string[] | null;
                /** @description Runs started at or after: an ISO 8601 date-time with a time zone, e.g. 2026-12-24T18:00:00Z */
                startedAfter?: string | null;
                /** @description Runs started before: an ISO 8601 date-time with a time zone, e.g. 2026-12-24T18:00:00Z */
                startedBefore?: string | null;
                /** @description Runs ended at or after: an ISO 8601 date-time with a time zone, e.g. 2026-12-24T18:00:00Z */
                endedAfter?: string | null;
                /** @description Runs ended before: an ISO 8601 date-time with a time zone, e.g. 2026-12-24T18:00:00Z */
                endedBefore?: string | null;
                correlationId?: string | null;
                /** @description Runs started by this run's SUB_WORKFLOW tasks */
                parent?: string | null;
                workflowRun?: string | null;
                /** @description Runs restarted from this run */
                restartedFrom?: string | null;
                awaitingAdmission?: boolean | null;
                slaBreached?: boolean | null;
                /** @description Repeat: tenant=acme, amount>=100, tenant in (acme, globex). The filter grammar of docs/search-attributes.md, on attributes the runs' workflow declares (else 422 naming searchAttribute). */
                searchAttribute?: string[] | null;
                limit?: number;
                /** @description Opaque: only the `nextCursor` of the previous page of this list, in the same order, is read; any other string is refused (422 naming `cursor`). */
                cursor?: string | null;
                order?: components["schemas"]["Order"];
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RunPage"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    start_v1_ns__namespace__executions_post: {
        parameters: {
            query?: {
                /** @description Wait up to this long for the run to end: 30, 30s, 1m (at most 60 s). The run's own end wakes the wait; nothing polls. */
                wait?: string | null;
            };
            header?: {
                /** @description The same as the body's requestId: a retried start returns the run the first one created. 1 to 256 printable characters, no spaces; with a requestId in the body, the same key (else 422). */
                "Idempotency-Key"?: string | null;
            };
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["StartRequest"];
            };
        };
        responses: {
            /** @description A retried start (same requestId): the run it created. With `wait`: the run, ended in time (its status, output and reason; no tasks) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartResponse"] | components["schemas"]["ExecutionView"];
                };
            };
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartResponse"];
                };
            };
            /** @description With `wait`: started (or found), not ended in time */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartResponse"];
                };
            };
            /** @description No such workflow */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description LIMIT_EXCEEDED: maxConcurrentExecutions; IDEMPOTENCY_KEY_REUSED: the key started another run */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The input is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A namespace quota: {quota, limit, current, retryAfterSeconds}; TOO_MANY_WAITERS: this replica holds SLUICEWAY_MAX_RUN_WAITERS waits (Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    start_runs: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["StartBatch"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartBatchResponse"];
                };
            };
            /** @description Some starts were refused: see each item's code */
            207: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartBatchResponse"];
                };
            };
            /** @description The body is larger than SLUICEWAY_MAX_REQUEST_BYTES */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The envelope is invalid (not an object, no `starts` list, more than 1000 items) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_run: {
        parameters: {
            query?: {
                include_tasks?: boolean;
                /** @description Wait up to this long for the run to end: 30, 30s, 1m (at most 60 s). The run's own end wakes the wait; nothing polls. */
                wait?: string | null;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExecutionView"];
                };
            };
            /** @description No such run in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    run_audit: {
        parameters: {
            query?: {
                /** @description Entries after this id: the nextAfter of the last answer */
                after?: number;
                limit?: number;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuditPage"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    force_decide: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    run_logs: {
        parameters: {
            query?: {
                /** @description Only this task reference (every attempt) */
                task?: string | null;
                /** @description Lines after this id: the nextAfter of the last answer */
                after?: number;
                limit?: number;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LogPage"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    send_message_v1_ns__namespace__executions__execution_id__messages_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": unknown;
            };
        };
        responses: {
            /** @description `{id, delivered}`: queued; `delivered` when a waiting task took it at once */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not running */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The message is larger than 65536 bytes of JSON, or the namespace's payload limit: {field, size, limit, limitSource} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run holds 1000 messages nobody took yet: {limit, current} */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    pause_run: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PauseRequest"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OperationResponse"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ... */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The input is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A namespace quota: the run would run again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    rerun_run: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RerunRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OperationResponse"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ... */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The input is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A namespace quota: the run would run again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    restart_run: {
        parameters: {
            query?: never;
            header?: {
                /** @description The same as the body's requestId: a retried start returns the run the first one created. 1 to 256 printable characters, no spaces; with a requestId in the body, the same key (else 422). */
                "Idempotency-Key"?: string | null;
            };
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["RestartRequest"] | null;
            };
        };
        responses: {
            /** @description A retried restart */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartResponse"];
                };
            };
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartResponse"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ... */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The input is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A namespace quota: the run would run again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    resume_run: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OperationResponse"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ... */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The input is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A namespace quota: the run would run again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    retry_run: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OperationResponse"];
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not in a state for it: NOT_RUNNING, NOT_FINISHED, COMPLETED, NOTHING_TO_RETRY, ... */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The input is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A namespace quota: the run would run again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    terminate_run: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["TerminateRequest"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No such run */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The run is not running */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    why_run: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A run id, as returned when it started */
                execution_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such run in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_task_definitions_v1_ns__namespace__metadata_task_definitions_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    }[];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_task_definition: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TaskDefinitionBody"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_task_definition_v1_ns__namespace__metadata_task_definitions__name__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such task type */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_workflows: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    }[];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_workflow: {
        parameters: {
            query?: {
                /** @description A pinned version; the live one when unset. */
                version?: number | null;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such workflow (or version) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    queues_v1_ns__namespace__queues_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    }[];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    workers_v1_ns__namespace__queues_workers_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    }[];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    depth_v1_ns__namespace__queues__name__depth_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_quotas_v1_ns__namespace__quotas_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_quotas: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["QuotaSpec"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_schedules_v1_ns__namespace__schedules_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    }[];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_schedule_v1_ns__namespace__schedules__name__get: {
        parameters: {
            query?: {
                /** @description Next fire times to list. */
                upcoming?: number;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ScheduleSpec"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description maxSchedules: {quota, limit, current, retryAfterSeconds} */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    backfill_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BackfillRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    pause_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    resume_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    trigger_schedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["TriggerRequest"] | null;
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such schedule */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    semaphores_v1_ns__namespace__semaphores_get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    }[];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    semaphore_v1_ns__namespace__semaphores__name__get: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such semaphore */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_semaphore: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SemaphoreBody"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description Accepted, not reconciled yet */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description No Kubernetes identity to write with */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes RBAC does not let the caller write this object */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Another object owns this name */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid: the API, the API server or the operator refused it; the message names the field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Kubernetes is unreachable or failing, or this process runs without it: the reason says which */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_tasks: {
        parameters: {
            query?: {
                /** @description Repeat or comma-separate */
                status?: string[] | null;
                taskType?: string | null;
                workerId?: string | null;
                /** @description Tasks of this run */
                executionId?: string | null;
                referenceName?: string | null;
                /** @description The engine's task type: HUMAN, SIMPLE, HTTP, ... */
                type?: components["schemas"]["TaskType"] | null;
                /** @description Of runs of this workflow */
                workflow?: string | null;
                limit?: number;
                /** @description Opaque: only the `nextCursor` of the previous page of this list, in the same order, is read; any other string is refused (422 naming `cursor`). */
                cursor?: string | null;
                order?: components["schemas"]["Order"];
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TaskPage"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    heartbeats_v1_ns__namespace__tasks_heartbeats_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["HeartbeatBatch"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HeartbeatBatchResponse"];
                };
            };
            /** @description Some heartbeats were invalid: see `errors` */
            207: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HeartbeatBatchResponse"];
                };
            };
            /** @description The envelope is invalid (not an object, no `heartbeats` list, more than 1000 items) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    poll_v1_ns__namespace__tasks_poll_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PollRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PollResponse"];
                };
            };
            /** @description No valid token or API key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The caller may not `poll` one of these task types here */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    report_results_v1_ns__namespace__tasks_results_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ResultBatch"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ResultBatchResponse"];
                };
            };
            /** @description Some results were refused, or failed their task for an output over the payload limit (413): see each item's code */
            207: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ResultBatchResponse"];
                };
            };
            /** @description The envelope is invalid (not an object, no `results` list, more than 1000 items) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    complete_v1_ns__namespace__tasks__task_id__complete_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A task id, as leased */
                task_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["HumanCompletion"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WaitingTaskView"];
                };
            };
            /** @description The caller may not `update` workflowruns named by the task's workflow (or, for a task that is not a HUMAN task of this namespace, may not `get` its workflowruns) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such task in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not a HUMAN task, or it no longer waits (decided, timed out, canceled) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The output is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    heartbeat: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A task id, as leased */
                task_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["Heartbeat"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: string;
                    };
                };
            };
            /** @description No longer leased under this epoch: stop working on it */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    task_logs: {
        parameters: {
            query?: {
                after?: number;
                limit?: number;
            };
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A task id, as leased */
                task_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LogPage"];
                };
            };
            /** @description No such task in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    reject_v1_ns__namespace__tasks__task_id__reject_post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A task id, as leased */
                task_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["HumanRejection"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WaitingTaskView"];
                };
            };
            /** @description The caller may not `update` workflowruns named by the task's workflow (or, for a task that is not a HUMAN task of this namespace, may not `get` its workflowruns) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such task in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not a HUMAN task, or it no longer waits (decided, timed out, canceled) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The output is larger than the namespace's payload limit: {field, size, limit} */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    report_result: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A task id, as leased */
                task_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SingleResult"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: string;
                    };
                };
            };
            /** @description Unknown task */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Stale epoch or not leased */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The output is over the namespace's payload limit: the task failed terminally with that reason */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    why_task: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                /** @description A task id, as leased */
                task_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            /** @description No such task in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    deliver_v1_ns__namespace__webhooks__name__post: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Kubernetes namespace */
                namespace: string;
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description `{matched, tasks}`: the waiting tasks this call completed (possibly none); and, when the Webhook names an `event`, `event`: the event as published, with what each Trigger did */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description The signature or token does not verify: nothing was read further or stored */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No Webhook of that name in this namespace */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the Webhook's maxPayloadBytes or the namespace's payload limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Invalid request: `fields` names every invalid field */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
}
