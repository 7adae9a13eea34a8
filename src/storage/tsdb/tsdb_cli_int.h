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
 *       labels given (no __name__: guessed from the sample types, e.g. heap,
 *       cpu, goroutine), and writes them as one block into DIR.
 *   analyze DIR     DIR is a storage path or one block directory: blocks,
 *       series, profiles, bytes by part (index, symbols, time chunks, value
 *       chunks), bytes per profile, top series by size.
 *   check DIR       verifies every checksum and reference of every block;
 *       names file and offset of each corruption.
 * Prints to stdout (errors to stderr). Returns the exit code: 0 ok, 1 a
 * runtime failure or (check) corruption found, 2 usage error. */
int pd_tsdb_cli_main(int argc, char **argv);

#endif
