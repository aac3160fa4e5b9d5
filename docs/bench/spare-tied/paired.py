# Paired ratios to none from hedge bench tied progress logs (stderr): for
# each repeat, the ratio of a configuration's run to none's (same seed);
# the geometric mean over repeats with +-2 standard errors of the log ratio.
#   python3 docs/bench/spare-tied/paired.py docs/bench/spare-tied/*.log
import re,sys,math,collections
for path in sys.argv[1:]:
    runs=collections.defaultdict(dict)
    for l in open(path):
        m=re.match(r'(\S+)\s+(\S+)\s+load ([\d.]+) (\S+)\s+run (\d+) p50\s+(\S+) p99\s+(\S+) p99.9\s+(\S+) .*extra\s+([\d.]+)% .*preempted (\d+)',l)
        if not m: continue
        be,w,load,cfg,rep,p50,p99,p999,extra,pre=m.groups()
        def dur(x):
            mm=re.match(r'([\d.]+)(µs|ms|s)',x); v=float(mm.group(1)); return v*{'µs':1e-3,'ms':1,'s':1e3}[mm.group(2)]
        runs[(be,w,load)].setdefault(rep,{})[cfg]=(dur(p50),dur(p99),dur(p999),float(extra),int(pre))
    print(path)
    for k,reps in runs.items():
        for cfg in sorted({c for v in reps.values() for c in v}-{'none'}):
            out=[]
            for qi,q in enumerate(['p50','p99','p99.9']):
                xs=[math.log(v[cfg][qi]/v['none'][qi]) for v in reps.values() if cfg in v and 'none' in v]
                if len(xs)<2: continue
                n=len(xs); m=sum(xs)/n; sd=(sum((x-m)**2 for x in xs)/(n-1))**.5
                out.append('%s %.2f (%.2f-%.2f)'%(q,math.exp(m),math.exp(m-2*sd/n**.5),math.exp(m+2*sd/n**.5)))
            ex=sorted(v[cfg][3] for v in reps.values() if cfg in v)
            pre=sum(v[cfg][4] for v in reps.values() if cfg in v)
            print(' ',k[0],k[1],k[2],cfg.ljust(15),' | '.join(out),'| extra %.1f%%'%(ex[len(ex)//2] if ex else -1),'| preempted',pre)
