update admhnd set vrijgegeven = now() where id = $1
