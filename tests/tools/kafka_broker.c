/* A Kafka broker for the tests: librdkafka's mock cluster on 127.0.0.1.
 *
 *   kafka_broker [-b BROKERS] [-t TOPIC:PARTITIONS]...
 *
 * Prints "bootstrap HOST:PORT[,...]" on stdout once the cluster listens,
 * then serves until SIGTERM or SIGINT, or until its parent exits. Topics not
 * created with -t are created on first use (4 partitions, the mock's
 * default).
 *
 * Commands on standard input, one a line (end of input is not a stop):
 *   fail-commits N   answer the next N OffsetCommit requests with an error
 *                    (INVALID_COMMIT_OFFSET_SIZE: no retry, no rejoin)
 *   clear-commits    answer them normally again
 * Each command is answered with "ok" on stdout.
 *
 * The mock is a real protocol server (kcat and the plugin talk to it over
 * TCP), with limits the tests must respect: it keeps no transaction
 * markers, so a read_committed consumer also sees the messages of aborted
 * transactions; it does not store offsets sent with a transaction; and it
 * keeps only the newest 5 MB or so of each partition, deleting older
 * message sets.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define API_OFFSET_COMMIT 8 /* Kafka protocol ApiKey */
#define MAX_FAILS 100000

/* Carry out one command line; unknown ones are reported on stderr. */
static void command(rd_kafka_mock_cluster_t *mc, const char *line)
{
    long n = 0;
    if (sscanf(line, "fail-commits %ld", &n) == 1 && n > 0 &&
        n <= MAX_FAILS) {
        rd_kafka_resp_err_t *errs = calloc((size_t)n, sizeof *errs);
        if (!errs) {
            fprintf(stderr, "kafka_broker: out of memory\n");
            return;
        }
        for (long i = 0; i < n; i++)
            errs[i] = RD_KAFKA_RESP_ERR_INVALID_COMMIT_OFFSET_SIZE;
        rd_kafka_mock_push_request_errors_array(mc, API_OFFSET_COMMIT,
                                                (size_t)n, errs);
        free(errs);
    } else if (strncmp(line, "clear-commits", 13) == 0) {
        rd_kafka_mock_clear_request_errors(mc, API_OFFSET_COMMIT);
    } else {
        fprintf(stderr, "kafka_broker: unknown command: %s", line);
        return;
    }
    printf("ok\n");
    fflush(stdout);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    int brokers = 1;
    int opt;
    const char *topics[64];
    int ntopics = 0;
    while ((opt = getopt(argc, argv, "b:t:")) != -1) {
        if (opt == 'b')
            brokers = atoi(optarg);
        else if (opt == 't' && ntopics < 64)
            topics[ntopics++] = optarg;
        else {
            fprintf(stderr, "usage: %s [-b BROKERS] [-t TOPIC:PARTITIONS]...\n",
                    argv[0]);
            return 2;
        }
    }
    if (brokers < 1 || brokers > 9) {
        fprintf(stderr, "kafka_broker: -b takes 1 to 9\n");
        return 2;
    }
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "kafka_broker: %s\n", err);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
    if (!mc) {
        fprintf(stderr, "kafka_broker: cannot start the mock cluster\n");
        rd_kafka_destroy(rk);
        return 1;
    }
    for (int i = 0; i < ntopics; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", topics[i]);
        char *colon = strrchr(name, ':');
        int parts = 1;
        if (colon) {
            *colon = '\0';
            parts = atoi(colon + 1);
        }
        rd_kafka_resp_err_t e =
            rd_kafka_mock_topic_create(mc, name, parts > 0 ? parts : 1, 1);
        if (e) {
            fprintf(stderr, "kafka_broker: topic %s: %s\n", name,
                    rd_kafka_err2str(e));
            return 1;
        }
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);
    /* A test that dies must not leave its broker behind. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        stop = 1;
    int input = 1;
    char line[256];
    while (!stop) {
        struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
        if (!input || poll(&pfd, 1, 100) <= 0) {
            if (!input)
                usleep(100 * 1000);
            continue;
        }
        if (fgets(line, sizeof line, stdin))
            command(mc, line);
        else
            input = 0; /* end of input: serve on */
    }
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    return 0;
}
