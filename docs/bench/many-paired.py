# Paired ratios of each configuration to none-two-choice from hedge bench
# results.json files: for each repeat, the ratio of the two kept runs
# (same arrivals and stalls); the geometric mean over repeats with +-2
# standard errors of the log ratio; the median share hedged; this
# process's CPU per request.
#   python3 docs/bench/many-paired.py docs/bench/many-c1 docs/bench/many-c10 ...
import json,sys,math
BASE='none-two-choice'
med=lambda a: sorted(a)[len(a)//2]
for path in sys.argv[1:]:
    d=json.load(open(path+'/results.json'))
    for b in d['backends']:
        runs=[r for r in b['runs'] if r['kept']]
        by={}
        for r in runs: by.setdefault(r['repeat'],{})[r['config']]=r
        configs=sorted({r['config'] for r in runs}-{BASE})
        for c in configs:
            out=[]
            for q in ['p50_us','p99_us','p999_us']:
                xs=[math.log(v[c][q]/v[BASE][q]) for v in by.values() if c in v and BASE in v]
                n=len(xs); m=sum(xs)/n; sd=(sum((x-m)**2 for x in xs)/(n-1))**.5 if n>1 else 0
                out.append("%s %.2f [%.2f, %.2f]"%(q[:-3],math.exp(m),math.exp(m-2*sd/n**.5),math.exp(m+2*sd/n**.5)))
            cpu={k:[r['self_cpu_cores']/r['achieved_rate']*1e6 for r in runs if r['config']==k] for k in [BASE,c]}
            ext=[r['extra_pct'] for r in runs if r['config']==c]
            print(path, c, b['scenario'].get('clients',1), b['scenario'].get('fan_out',1), '|', ' | '.join(out), '| hedged %.2f%%'%med(ext), '| cpu/req none %.0fus %s %.0fus'%(med(cpu[BASE]),c,med(cpu[c])), '| noisy', sum(r['noisy'] for r in runs))
