/* flight.h - the flight recorder: a communicator's last operations (its ring
 * and queue, core/ops.h) and, after a timeout, the verdict (core/watch.h),
 * written to HCOMM_TRACE_DIR as one text file per rank and communicator when
 * it fails or on demand, and reported as log lines. tools/hcomm_trace.c
 * merges the files of a job and prints the verdict again, offline.
 *
 * The file, one record per line, fields as key=value:
 *   hcomm-flight 1
 *   comm id=<hex> rank=R nranks=N host=H pid=P reason=<why> status=<status>
 *   clock realtime_ns=<now> (every time below is CLOCK_REALTIME ns)
 *   verdict <the line, or ->
 *   op seq= cseq= coll= dtype= bytes= algo= state= status= issue= start= end= waiting=a,b
 */
#ifndef HC_CORE_FLIGHT_H
#define HC_CORE_FLIGHT_H

#include "core/comm.h"
#include "core/verdict.h"

#define HC_FLIGHT_MAGIC "hcomm-flight 1"

/* Writes comm's file if HCOMM_TRACE_DIR is set; why: "timeout", "dump"...
 * comm's own thread (or its lock held). */
void hc_flight_write(hcomm_comm_t comm, const char *why);
/* The last operations as warn lines, and the file: hcomm_comm_dump_state. */
void hc_flight_report(hcomm_comm_t comm, const char *why);
/* One warn line with where comm is (any thread). */
void hc_flight_where_line(hcomm_comm_t comm, const hc_rank_where_t *w, const char *why);
/* A dump signal asked for comm's report: its thread writes it (hc_comm_idle). */
void hc_flight_dump_requested(hcomm_comm_t comm);

/* An identity for comm's files that does not reveal its secret. */
uint64_t hc_flight_comm_id(hcomm_comm_t comm);

#endif
