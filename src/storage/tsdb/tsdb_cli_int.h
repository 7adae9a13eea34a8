/*
 * storage/tsdb/tsdb_cli_int.h — `profd tsdb ...`, the offline tools of the
 * embedded store (as promtool tsdb). main.c calls pd_tsdb_cli_main for
 * `profd tsdb ARGS...`.
 */
#ifndef PD_STORAGE_TSDB_TSDB_CLI_INT_H
#define PD_STORAGE_TSDB_TSDB_CLI_INT_H

/* Runs one tsdb subcommand. argv[0] is ignored (e.g. "tsdb"), argv[1] is the
 * subcommand:
 *   import --storage.path DIR [--label k=v ...] FILE|DIR...
 *       decodes every pprof file (directories: every file below them), with
 *       timestamp = the profile's time_nanos, else the file's mtime, and the
 *       labels given (no __name__: pd_profile_guess_type, the rule of
 *       `profd push`), and writes them as one block into DIR. Takes the
 *       store's lock (pd__tsdb_lock_store): a store a running profd has open
 *       is refused (exit 1, the lock file named).
 *   analyze DIR     DIR is a storage path or one block directory: blocks,
 *       series, profiles, bytes by part (index, symbols, time chunks, value
 *       chunks), bytes per profile, top series by size.
 *   check DIR       verifies every checksum and reference of every block,
 *       every WAL segment and DIR/series (segment numbers contiguous, the
 *       series file present once the WAL starts past segment 1); names file
 *       and offset of each corruption.
 *   repair DIR      (tsdb_repair.c; the store must not be open: takes its
 *       lock) rewrites every block that fails check or is marked
 *       compaction.failed from what verifies, moves the originals to
 *       DIR/repair-<UTC time>/, prints every dropped series/profile.
 * `tsdb --help`, `tsdb -h` and `tsdb COMMAND --help|-h` print the usage on
 * stdout (exit 0); an unknown COMMAND is one line on stderr (exit 2).
 * Prints to stdout (errors to stderr). Returns the exit code: 0 ok, 1 a
 * runtime failure or (check) corruption found, 2 usage error. */
int pd_tsdb_cli_main(int argc, char **argv);

/* `profd tsdb repair DIR` (above). Returns 0, or 1 when the lock is held or
 * something could not be rewritten or moved (printed). */
int pd__tsdb_repair(const char *dir);

#endif
