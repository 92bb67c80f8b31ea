-- The name a dead-lettered message's source shows: a lane's is its queue's (the `consumer_lanes` migration).
-- A function, not a subquery, because the claim is planned at every call and a subquery's join would be
-- planned with it each time; PL/pgSQL plans its statement once per connection, and runs it only for the
-- rare dead-lettered message.
create function queue_display_name(queue uuid) returns text language plpgsql stable as $$
begin
    return (select coalesce(p.name, s.name) from queues s left join queues p on p.id = s.parent_queue_id
            where s.id = queue);
end $$;
