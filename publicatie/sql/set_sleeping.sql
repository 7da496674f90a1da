-- Records whether the leader sleeps ($1): registrations notify only a sleeping publisher
-- (migration 0011).
update publicatie_state set sleeping = $1
