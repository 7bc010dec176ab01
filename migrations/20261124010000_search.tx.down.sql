DROP TABLE metadata_fields;
--bun:split
DROP TABLE search_results;
--bun:split
DROP TABLE search_sites;
--bun:split
DROP TABLE searches;
