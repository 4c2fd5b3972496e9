# WebSearch flow sizes (DCTCP, SIGCOMM'10), as HPCC's traffic generator uses them
# (traffic_gen/WebSearch_distribution.txt). Each line: <flow size, bytes> <cumulative percent>;
# sizes between two points are interpolated linearly. Mean 1.71 MB.
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
