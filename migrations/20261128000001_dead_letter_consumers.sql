-- The consumers that name a queue as their dead-letter queue, found by the queue's account and name:
-- a page of the stats and the per-queue gauges look up only the queues they show, whatever the number
-- of queues. Only consumers with a dead-letter queue are in it.
create index consumers_dead_letter_queue on consumers (account_id, dead_letter_queue)
    where dead_letter_queue <> '';
