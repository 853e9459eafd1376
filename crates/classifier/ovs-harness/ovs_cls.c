/* ovs_cls: OVS 3.1's own classifier (lib/classifier.c) run over a workload file written by
 * ferrovs's `classifier-bench --with-ovs-cls`, so that both classifiers hold the same rules
 * and look up the same keys in the same order.
 *
 *   ovs_cls WORKLOAD [--lookups N] [--reps N] [--prios] [--serve] [--no-tries]
 *
 * The workload file is line based (`#` starts a comment line):
 *
 *   R <priority> <field>=<value>/<mask> ...    a rule (fields not named are wildcarded)
 *   H <field>=<value> ...                      a key that should match some rule
 *   M <field>=<value> ...                      a key that should match no rule
 *
 * Fields: in_port dl_type nw_src nw_dst nw_proto nw_ttl tp_src tp_dst; values and masks are
 * unsigned integers in C syntax (0x... hex), host order, as ferrovs's `FlowKey` holds them.
 *
 * Set-up mirrors tests/test-classifier.c's benchmark(): classifier_init with
 * flow_segment_u64s (staged lookup), prefix tries on nw_dst and nw_src (OVS's default
 * `prefixes` for an OpenFlow table, as ferrovs's default), every rule inserted in
 * OVS_VERSION_MIN and looked up in it, one thread. Unlike that benchmark, the keys are taken
 * in order, cycling, as ferrovs's benchmark takes them. --no-tries leaves the prefix tries
 * out, as classifier-bench's --no-tries does.
 *
 * Output (one line each, `key=value` pairs):
 *   ovs-cls rules= subtables= replaced= insert= hit-keys= miss-keys= matched-hits=
 *       matched-misses= flow-bytes=        after the build; matched-* count keys that found a
 *                                          rule, one untimed lookup each
 *   ovs-cls-wc kind=hit|miss bits= other= in_port= ... tp_dst=
 *                                          un-wildcarded bits per lookup, averaged over the
 *                                          keys: `bits` over the fields above, `other` over
 *                                          the rest of struct flow, then per field
 *   ovs-cls-prios kind=hit|miss P P ...    (--prios) each key's matched priority, -1 none
 *   ovs-cls-rep hits_nowc= hits_wc= misses_nowc= misses_wc=
 *                                          one repetition: lookups/s over N lookups of the
 *                                          hit keys and of the miss keys, wildcard tracking
 *                                          off and on (flow_wildcards_init_catchall before
 *                                          each lookup with tracking, as OVS's benchmark)
 *   ovs-cls-median ...                     the same, the median of the repetitions
 *
 * --serve: after the build, one repetition per line read from stdin (the caller alternates
 * its own lookups with OVS's, without rebuilding either table), until end of input. */

#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "classifier.h"
#include "cmap.h"
#include "flow.h"
#include "openvswitch/match.h"
#include "openvswitch/meta-flow.h"
#include "util.h"

/* One field of the workload format: where it sits in struct flow and how wide it is. */
struct field {
    const char *name;
    size_t ofs;         /* offsetof(struct flow, ...). */
    int size;           /* Bytes: 1, 2 or 4. */
    bool be;            /* Network byte order in struct flow. */
};

static const struct field fields[] = {
    { "in_port", offsetof(struct flow, in_port.ofp_port), 4, false },
    { "dl_type", offsetof(struct flow, dl_type), 2, true },
    { "nw_src", offsetof(struct flow, nw_src), 4, true },
    { "nw_dst", offsetof(struct flow, nw_dst), 4, true },
    { "nw_proto", offsetof(struct flow, nw_proto), 1, false },
    { "nw_ttl", offsetof(struct flow, nw_ttl), 1, false },
    { "tp_src", offsetof(struct flow, tp_src), 2, true },
    { "tp_dst", offsetof(struct flow, tp_dst), 2, true },
};
#define N_FIELDS ARRAY_SIZE(fields)

/* A parsed rule or key, before it becomes a cls_rule or a struct flow. */
struct spec {
    int priority;
    uint64_t value[N_FIELDS];
    uint64_t mask[N_FIELDS];
};

struct specs {
    struct spec *v;
    size_t n, allocated;
};

static void
put_field(struct flow *flow, const struct field *f, uint64_t v)
{
    uint8_t *p = (uint8_t *) flow + f->ofs;

    if (f->size == 1) {
        *p = v;
    } else if (f->size == 2) {
        uint16_t x = f->be ? htons(v) : v;
        memcpy(p, &x, 2);
    } else {
        uint32_t x = f->be ? htonl(v) : v;
        memcpy(p, &x, 4);
    }
}

static uint64_t
get_field(const struct flow *flow, const struct field *f)
{
    const uint8_t *p = (const uint8_t *) flow + f->ofs;

    if (f->size == 1) {
        return *p;
    } else if (f->size == 2) {
        uint16_t x;
        memcpy(&x, p, 2);
        return f->be ? ntohs(x) : x;
    } else {
        uint32_t x;
        memcpy(&x, p, 4);
        return f->be ? ntohl(x) : x;
    }
}

static struct spec *
specs_add(struct specs *s)
{
    if (s->n == s->allocated) {
        s->v = x2nrealloc(s->v, &s->allocated, sizeof *s->v);
    }
    struct spec *sp = &s->v[s->n++];
    memset(sp, 0, sizeof *sp);
    return sp;
}

static uint64_t
parse_u64(const char *s, const char *what, int line_no)
{
    char *end;

    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end) {
        ovs_fatal(0, "line %d: bad %s \"%s\"", line_no, what, s);
    }
    return v;
}

/* Parses `name=value[/mask]` into 'sp'; a key's field (no mask) gets an all-ones mask. */
static void
parse_token(char *tok, struct spec *sp, bool is_rule, int line_no)
{
    char *eq = strchr(tok, '=');
    if (!eq) {
        ovs_fatal(0, "line %d: expected field=value, got \"%s\"", line_no, tok);
    }
    *eq = '\0';
    char *val = eq + 1;
    char *slash = strchr(val, '/');
    if (slash) {
        *slash = '\0';
    }
    if (is_rule != (slash != NULL)) {
        ovs_fatal(0, "line %d: %s: a rule's field is value/mask, a key's a value",
                  line_no, tok);
    }
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (!strcmp(tok, fields[i].name)) {
            uint64_t max = fields[i].size == 4 ? UINT32_MAX
                           : fields[i].size == 2 ? UINT16_MAX : UINT8_MAX;
            uint64_t v = parse_u64(val, "value", line_no);
            uint64_t m = slash ? parse_u64(slash + 1, "mask", line_no) : max;
            if (v > max || m > max) {
                ovs_fatal(0, "line %d: %s: value or mask wider than the field",
                          line_no, tok);
            }
            sp->value[i] = v;
            sp->mask[i] = m;
            return;
        }
    }
    ovs_fatal(0, "line %d: unknown field \"%s\"", line_no, tok);
}

static void
read_workload(const char *path, struct specs *rules, struct specs *hits,
              struct specs *misses)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ovs_fatal(errno, "%s", path);
    }
    char *line = NULL;
    size_t cap = 0;
    int line_no = 0;
    while (getline(&line, &cap, f) > 0) {
        line_no++;
        char *save = NULL;
        char *kind = strtok_r(line, " \t\n", &save);
        if (!kind || kind[0] == '#') {
            continue;
        }
        struct spec *sp;
        bool is_rule = !strcmp(kind, "R");
        if (is_rule) {
            sp = specs_add(rules);
            char *prio = strtok_r(NULL, " \t\n", &save);
            if (!prio) {
                ovs_fatal(0, "line %d: rule without a priority", line_no);
            }
            uint64_t p = parse_u64(prio, "priority", line_no);
            if (p > INT_MAX - 1) {
                ovs_fatal(0, "line %d: priority %s too large", line_no, prio);
            }
            sp->priority = p;
        } else if (!strcmp(kind, "H")) {
            sp = specs_add(hits);
        } else if (!strcmp(kind, "M")) {
            sp = specs_add(misses);
        } else {
            ovs_fatal(0, "line %d: unknown line kind \"%s\"", line_no, kind);
        }
        for (char *tok; (tok = strtok_r(NULL, " \t\n", &save)); ) {
            parse_token(tok, sp, is_rule, line_no);
        }
    }
    free(line);
    fclose(f);
}

static struct flow *
make_flows(const struct specs *s)
{
    struct flow *flows = xzalloc(MAX(s->n, 1) * sizeof *flows);
    for (size_t k = 0; k < s->n; k++) {
        for (size_t i = 0; i < N_FIELDS; i++) {
            put_field(&flows[k], &fields[i], s->v[k].value[i]);
        }
    }
    return flows;
}

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Lookups/s of 'n' lookups over 'flows' in order, cycling. */
static double
time_lookups(const struct classifier *cls, struct flow *flows, size_t n_flows,
             size_t n, bool use_wc)
{
    size_t x = 0, found = 0;
    double t = now();
    for (size_t i = 0; i < n; i++) {
        const struct cls_rule *cr;
        if (use_wc) {
            struct flow_wildcards wc;
            flow_wildcards_init_catchall(&wc);
            cr = classifier_lookup(cls, OVS_VERSION_MIN, &flows[x], &wc);
        } else {
            cr = classifier_lookup(cls, OVS_VERSION_MIN, &flows[x], NULL);
        }
        found += cr != NULL;
        if (++x == n_flows) {
            x = 0;
        }
    }
    double rate = n / (now() - t);
    /* Keeps the lookups' results live. */
    if (found > n) {
        abort();
    }
    return rate;
}

/* One untimed lookup with tracking per key: how many found a rule, the un-wildcarded bits
 * (ovs-cls-wc line) and, with 'prios', each key's priority. */
static size_t
check_keys(const struct classifier *cls, struct flow *flows, size_t n_flows,
           const char *kind, bool prios)
{
    double bits[N_FIELDS] = { 0 };
    double total = 0, other = 0;
    size_t matched = 0;
    int *prio = xmalloc(MAX(n_flows, 1) * sizeof *prio);

    for (size_t k = 0; k < n_flows; k++) {
        struct flow_wildcards wc;
        flow_wildcards_init_catchall(&wc);
        const struct cls_rule *cr = classifier_lookup(cls, OVS_VERSION_MIN,
                                                      &flows[k], &wc);
        matched += cr != NULL;
        prio[k] = cr ? cr->priority : -1;

        const uint64_t *w = (const uint64_t *) &wc.masks;
        double all = 0;
        for (size_t i = 0; i < FLOW_U64S; i++) {
            all += count_1bits(w[i]);
        }
        double in_fields = 0;
        for (size_t i = 0; i < N_FIELDS; i++) {
            int b = count_1bits(get_field(&wc.masks, &fields[i]));
            bits[i] += b;
            in_fields += b;
        }
        total += in_fields;
        other += all - in_fields;
    }

    double n = MAX(n_flows, 1);
    printf("ovs-cls-wc kind=%s keys=%zu bits=%.2f other=%.2f", kind, n_flows,
           total / n, other / n);
    for (size_t i = 0; i < N_FIELDS; i++) {
        printf(" %s=%.2f", fields[i].name, bits[i] / n);
    }
    putchar('\n');
    if (prios) {
        printf("ovs-cls-prios kind=%s", kind);
        for (size_t k = 0; k < n_flows; k++) {
            printf(" %d", prio[k]);
        }
        putchar('\n');
    }
    free(prio);
    return matched;
}

static int
cmp_double(const void *a_, const void *b_)
{
    double a = *(const double *) a_, b = *(const double *) b_;
    return a < b ? -1 : a > b;
}

static double
median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[n / 2];
}

#define N_CASES 4

static void
usage(void)
{
    fprintf(stderr, "usage: ovs_cls WORKLOAD [--lookups N] [--reps N] [--prios] "
            "[--serve] [--no-tries]\n");
    exit(2);
}

int
main(int argc, char *argv[])
{
    const char *path = NULL;
    size_t n_lookups = 2000000, reps = 1;
    bool prios = false, serve = false, tries = true;

    set_program_name(argv[0]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lookups") && i + 1 < argc) {
            n_lookups = parse_u64(argv[++i], "--lookups", 0);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = parse_u64(argv[++i], "--reps", 0);
            reps = MAX(reps, 1);
        } else if (!strcmp(argv[i], "--prios")) {
            prios = true;
        } else if (!strcmp(argv[i], "--serve")) {
            serve = true;
        } else if (!strcmp(argv[i], "--no-tries")) {
            tries = false;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            usage();
        }
    }
    if (!path) {
        usage();
    }

    struct specs rules = { 0 }, hits = { 0 }, misses = { 0 };
    read_workload(path, &rules, &hits, &misses);

    struct classifier cls;
    static const enum mf_field_id trie_fields[] = { MFF_IPV4_DST, MFF_IPV4_SRC };
    classifier_init(&cls, flow_segment_u64s);
    if (tries && !classifier_set_prefix_fields(&cls, trie_fields,
                                               ARRAY_SIZE(trie_fields))) {
        ovs_fatal(0, "classifier_set_prefix_fields(nw_dst, nw_src) failed");
    }

    /* The rules stay where they are while the classifier holds them. */
    struct cls_rule *crs = xmalloc(MAX(rules.n, 1) * sizeof *crs);
    size_t replaced = 0;
    double t = now();
    for (size_t k = 0; k < rules.n; k++) {
        struct match match;
        match_init_catchall(&match);
        for (size_t i = 0; i < N_FIELDS; i++) {
            put_field(&match.flow, &fields[i],
                      rules.v[k].value[i] & rules.v[k].mask[i]);
            put_field(&match.wc.masks, &fields[i], rules.v[k].mask[i]);
        }
        cls_rule_init(&crs[k], &match, rules.v[k].priority);
        /* A duplicate (same match and priority) replaces the earlier rule, as a flow_mod
         * would; there should be none. */
        if (classifier_replace(&cls, &crs[k], OVS_VERSION_MIN, NULL, 0)) {
            replaced++;
        }
    }
    double insert = rules.n / MAX(now() - t, 1e-9);
    free(rules.v);

    struct flow *hit_flows = make_flows(&hits);
    struct flow *miss_flows = make_flows(&misses);
    size_t matched_hits = check_keys(&cls, hit_flows, hits.n, "hit", prios);
    size_t matched_misses = check_keys(&cls, miss_flows, misses.n, "miss", prios);
    printf("ovs-cls rules=%d subtables=%zu replaced=%zu insert=%.0f/s hit-keys=%zu "
           "miss-keys=%zu matched-hits=%zu matched-misses=%zu flow-bytes=%zu\n",
           classifier_count(&cls), cmap_count(&cls.subtables_map), replaced, insert,
           hits.n, misses.n, matched_hits, matched_misses, sizeof(struct flow));
    fflush(stdout);

    static const char *const names[N_CASES] = {
        "hits_nowc", "hits_wc", "misses_nowc", "misses_wc"
    };
    double *rates[N_CASES];
    for (int c = 0; c < N_CASES; c++) {
        rates[c] = xcalloc(reps, sizeof *rates[c]);
    }
    size_t done = 0;
    char cmd[64];
    while (serve ? fgets(cmd, sizeof cmd, stdin) != NULL : done < reps) {
        double r[N_CASES];
        for (int c = 0; c < N_CASES; c++) {
            bool miss = c >= 2;
            struct flow *flows = miss ? miss_flows : hit_flows;
            size_t n = miss ? misses.n : hits.n;
            r[c] = n ? time_lookups(&cls, flows, n, n_lookups, c & 1) : 0;
        }
        printf("ovs-cls-rep");
        for (int c = 0; c < N_CASES; c++) {
            printf(" %s=%.0f", names[c], r[c]);
            if (done < reps) {
                rates[c][done] = r[c];
            }
        }
        putchar('\n');
        fflush(stdout);
        done++;
    }
    if (!serve && done) {
        printf("ovs-cls-median");
        for (int c = 0; c < N_CASES; c++) {
            printf(" %s=%.0f", names[c], median(rates[c], done));
        }
        putchar('\n');
    }

    /* No classifier_destroy(): the process ends here, and the rules would have to be
     * removed first. */
    return 0;
}
