-- The projection runs its own Alembic migrations at start; this only creates the database.
SELECT 'famiglia database ready';
