select statuslev, vrijgegeven is not null from admhnd where id = $1 for update
