# detrain report: Drift between replicas: fast (run `gnuplot drift-fast.gp` in this folder)
set terminal svg noenhanced size 800,480 background rgb 'white'
set output 'drift-fast.svg'
set title 'Drift between replicas: fast'
set grid
set logscale xy
set xlabel 'step'
set ylabel 'mean pairwise L2 distance of the weights'
set format y '%.0e'
set key outside right
set xrange [1:234]
plot 'drift-fast-0.dat' using 1:2 with linespoints lt 1 lw 2 title 'none', 'drift-fast-1.dat' using 1:2 with linespoints lt 2 lw 2 title 'init', 'drift-fast-2.dat' using 1:2 with linespoints lt 3 lw 2 title 'data_order', 'drift-fast-3.dat' using 1:2 with linespoints lt 4 lw 2 title 'init+data_order'
set terminal pngcairo noenhanced size 800,480
set output 'drift-fast.png'
replot
unset output
