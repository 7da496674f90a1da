-- The operators' actions on handeling $1, in order.
select id, actie, door, op, coalesce(toelichting, '') as toelichting
from admhnd_beheer where admhnd_id = $1 order by op, id
