-- A dispatch slot is held by a node, which hands it from batch to batch and gives it back once idle
-- (src/engine/slots.rs): `holder` is the node that holds it, so that a node renews only its own.
alter table dispatch_slots add column holder uuid;
