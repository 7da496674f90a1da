-- One row per polling cluster: who publishes, since which epoch, and the cluster's last polling
-- activity, all judged by the database clock.
create table if not exists publicatie_lease (
    cluster    text        primary key,
    holder     text        not null default '',
    epoch      bigint      not null default 0,
    heartbeat  timestamptz not null default '-infinity',
    acquired   timestamptz null
);
