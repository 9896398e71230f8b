"""evaluate.communication: the collectives of a step. Public face: communication.communication
(the table, per layout), communication.exposed and floor_rows (what compute leaves exposed), with
the rows (comm_rows), the overlap rules (comm_overlap) and the placement on nodes
(comm_placement)."""
