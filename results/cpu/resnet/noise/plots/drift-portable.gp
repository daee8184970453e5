# detrain report: Drift between replicas: portable (run `gnuplot drift-portable.gp` in this folder)
set terminal svg noenhanced size 800,480 background rgb 'white'
set output 'drift-portable.svg'
set title 'Drift between replicas: portable'
set grid
set logscale xy
set xlabel 'step'
set ylabel 'mean pairwise L2 distance of the weights'
set format y '%.0e'
set key outside right
set xrange [1:234]
plot keyentry with lines lt 1 title 'none (identical)', 'drift-portable-1.dat' using 1:2 with linespoints lt 2 lw 2 title 'init', 'drift-portable-2.dat' using 1:2 with linespoints lt 3 lw 2 title 'data_order', 'drift-portable-3.dat' using 1:2 with linespoints lt 4 lw 2 title 'init+data_order'
set terminal pngcairo noenhanced size 800,480
set output 'drift-portable.png'
replot
unset output
